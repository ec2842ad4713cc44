/* SPDX-License-Identifier: MIT */
/*
 * placement.c - the placement order (placement.h): by the VF's evidence,
 * then by its parent's VFs out of service, and a shuffle among equals.
 * Pure but for placement_seed().
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

static bool same_place(const struct store_placement *x, const struct store_placement *y)
{
	return x->group == y->group && x->parent_rank == y->parent_rank;
}

static int compare_placement(const void *a, const void *b)
{
	const struct store_placement *x = a, *y = b;

	if (x->group != y->group)
		return x->group < y->group ? -1 : 1;
	if (x->parent_rank != y->parent_rank)
		return x->parent_rank < y->parent_rank ? -1 : 1;
	return strcmp(x->vf, y->vf);
}

/* How many of the sorted parents[0..n) are `parent`. */
static size_t count_parent(char (*parents)[VF_ADDR_BUFSZ], size_t n, const char *parent)
{
	char(*hit)[VF_ADDR_BUFSZ] = bsearch(parent, parents, n, sizeof(*parents), compare_addr);
	size_t lo, hi;

	if (!hit)
		return 0;
	for (lo = (size_t)(hit - parents); lo > 0 && !strcmp(parents[lo - 1], parent); lo--)
		;
	for (hi = (size_t)(hit - parents) + 1; hi < n && !strcmp(parents[hi], parent); hi++)
		;
	return hi - lo;
}

/* Fisher-Yates within each run of equals (the list is sorted). */
static void shuffle_groups(struct store_placement *list, size_t n, uint64_t seed)
{
	for (size_t start = 0, end; start < n; start = end) {
		for (end = start + 1; end < n && same_place(&list[end], &list[start]); end++)
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
	/* the parent of every VF out of service, once per such VF, sorted */
	_cleanup_free_ char(*out_parents)[VF_ADDR_BUFSZ] = calloc(MAX(n, (size_t)1),
								  sizeof(*out_parents));
	size_t n_out_parents = 0, k = 0;

	if (!out_parents)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (vfs[i].parent[0] && vfs[i].out_of_service)
			memcpy(out_parents[n_out_parents++], vfs[i].parent, VF_ADDR_BUFSZ);
	qsort(out_parents, n_out_parents, sizeof(*out_parents), compare_addr);
	for (size_t i = 0; i < n; i++) {
		const struct placement_vf *v = &vfs[i];
		enum store_placement_group g =
			rule_placement_group(mode, v->out_of_service, v->claimed, v->held_back,
					     v->suspect, v->failing, v->probation);
		if (g == STORE_PLACE_NONE)
			continue;
		memcpy(out[k].vf, v->vf, VF_ADDR_BUFSZ);
		out[k].group = g;
		out[k++].parent_rank = rule_placement_parent_rank(
			v->parent[0] != '\0',
			v->parent[0] ? count_parent(out_parents, n_out_parents, v->parent) : 0);
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
