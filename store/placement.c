/* SPDX-License-Identifier: MIT */
/*
 * placement.c - the placement order (placement.h): grouping by the parent's
 * state and a shuffle within each group.  Pure but for placement_seed().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/cleanup.h"
#include "store/placement.h"
#include "store/rules.h"

/* splitmix64: the draw's generator, seeded once per read */
static uint64_t rng_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* uniform in [0, bound), bound > 0: by rejection, no modulo bias */
static uint64_t rng_below(uint64_t *state, uint64_t bound)
{
	uint64_t limit = UINT64_MAX - UINT64_MAX % bound, v;

	do
		v = rng_next(state);
	while (v >= limit);
	return v % bound;
}

static int compare_addr(const void *a, const void *b)
{
	return strcmp(a, b);
}

static int compare_placement(const void *a, const void *b)
{
	const struct store_placement *x = a, *y = b;

	if (x->group != y->group)
		return x->group < y->group ? -1 : 1;
	return strcmp(x->vf, y->vf);
}

/* Fisher-Yates within each run of one group (the list is sorted by group). */
static void shuffle_groups(struct store_placement *list, size_t n, uint64_t seed)
{
	for (size_t start = 0, end; start < n; start = end) {
		for (end = start + 1; end < n && list[end].group == list[start].group; end++)
			;
		for (size_t i = end - 1; i > start; i--) {
			size_t j = start + (size_t)rng_below(&seed, i - start + 1);
			struct store_placement t = list[i];
			list[i] = list[j];
			list[j] = t;
		}
	}
}

int placement_order(enum store_mode mode, const struct placement_vf *vfs, size_t n, uint64_t seed,
		    struct store_placement *out, size_t *n_out)
{
	_cleanup_free_ char(*degraded)[VF_ADDR_BUFSZ] = calloc(MAX(n, (size_t)1),
							       sizeof(*degraded));
	size_t n_degraded = 0, k = 0;

	if (!degraded)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (vfs[i].parent[0] && vfs[i].out_of_service)
			memcpy(degraded[n_degraded++], vfs[i].parent, VF_ADDR_BUFSZ);
	qsort(degraded, n_degraded, sizeof(*degraded), compare_addr);
	for (size_t i = 0; i < n; i++) {
		const struct placement_vf *v = &vfs[i];
		bool parent_degraded = v->parent[0] && bsearch(v->parent, degraded, n_degraded,
							       sizeof(*degraded), compare_addr);
		enum store_placement_group g = rule_placement_group(mode, v->out_of_service,
								    v->claimed, v->held_back,
								    v->suspect, parent_degraded);
		if (g == STORE_PLACE_NONE)
			continue;
		memcpy(out[k].vf, v->vf, VF_ADDR_BUFSZ);
		out[k++].group = g;
	}
	qsort(out, k, sizeof(*out), compare_placement);
	shuffle_groups(out, k, seed);
	*n_out = k;
	return 0;
}

int placement_seed(uint64_t *seed)
{
	return getrandom(seed, sizeof(*seed), 0) == (ssize_t)sizeof(*seed) ? 0 : -EIO;
}
