/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - the list of extra `metrics` providers (metrics.h).
 *
 * Locks: row 9 of the lock table in docs/architecture.md; providers run
 * after it is dropped.
 */
#include "fs/metrics.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/limits.h"

struct metrics_provider {
	metrics_render_fn render;
	void *userdata;
};

struct metrics {
	pthread_mutex_t lock;
	struct metrics_provider providers[METRICS_MAX_PROVIDERS];
	size_t count;
	/* last checks, sorted by vf_id; guarded by lock (a leaf) */
	struct last_check *checks;
	size_t n_checks, cap_checks;
	metrics_checks_fn source; /* set once, before any reader: read without the lock */
	void *source_userdata;
};

struct last_check {
	uint64_t vf_id;
	uint64_t claim_id;
	enum metrics_check result;
};

int metrics_new(struct metrics **ret)
{
	struct metrics *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	*ret = m;
	return 0;
}

void metrics_free(struct metrics *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->lock);
	free(m->checks);
	free(m);
}

int metrics_add_provider(struct metrics *m, metrics_render_fn render, void *userdata)
{
	int r = 0;

	if (!m || !render)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	if (m->count < METRICS_MAX_PROVIDERS)
		m->providers[m->count++] = (struct metrics_provider){ .render = render,
								      .userdata = userdata };
	else
		r = -ENOSPC;
	pthread_mutex_unlock(&m->lock);
	return r;
}

void metrics_render_providers(struct metrics *m, FILE *out)
{
	struct metrics_provider providers[METRICS_MAX_PROVIDERS];
	size_t count;

	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	count = m->count;
	memcpy(providers, m->providers, count * sizeof(providers[0]));
	pthread_mutex_unlock(&m->lock);
	for (size_t i = 0; i < count; i++)
		providers[i].render(providers[i].userdata, out);
}

/* lock held.  The position of vf_id, or where it would go. */
static size_t check_pos(const struct metrics *m, uint64_t vf_id)
{
	size_t lo = 0, hi = m->n_checks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->checks[mid].vf_id < vf_id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void metrics_note_check(struct metrics *m, uint64_t vf_id, uint64_t claim_id,
			enum metrics_check result)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	size_t pos = check_pos(m, vf_id);
	if (pos == m->n_checks || m->checks[pos].vf_id != vf_id) {
		if (m->n_checks == VFS_MAX) {
			/* full: the oldest VF id goes (this one, when it is the oldest) */
			if (pos == 0)
				goto out;
			memmove(&m->checks[0], &m->checks[1], (pos - 1) * sizeof(*m->checks));
			pos--;
		} else {
			if (m->n_checks == m->cap_checks) {
				size_t cap = m->cap_checks ? 2 * m->cap_checks : 64;
				struct last_check *grown = reallocarray(m->checks, cap,
									sizeof(*grown));
				if (!grown)
					goto out; /* a metric only: the series is left out */
				m->checks = grown;
				m->cap_checks = cap;
			}
			memmove(&m->checks[pos + 1], &m->checks[pos],
				(m->n_checks - pos) * sizeof(*m->checks));
			m->n_checks++;
		}
	}
	m->checks[pos] = (struct last_check){ vf_id, claim_id, result };
out:
	pthread_mutex_unlock(&m->lock);
}

enum metrics_check metrics_last_check(struct metrics *m, uint64_t vf_id, uint64_t claim_id)
{
	enum metrics_check r = METRICS_CHECK_NONE;

	if (!m)
		return r;
	pthread_mutex_lock(&m->lock);
	size_t pos = check_pos(m, vf_id);
	if (pos < m->n_checks && m->checks[pos].vf_id == vf_id &&
	    m->checks[pos].claim_id == claim_id)
		r = m->checks[pos].result;
	pthread_mutex_unlock(&m->lock);
	return r;
}

int metrics_set_check_source(struct metrics *m, metrics_checks_fn fn, void *userdata)
{
	if (!m || !fn)
		return -EINVAL;
	m->source = fn;
	m->source_userdata = userdata;
	return 0;
}

size_t metrics_source_checks(struct metrics *m, struct metrics_source_check **ret)
{
	*ret = NULL;
	if (!m || !m->source)
		return 0;
	return m->source(m->source_userdata, ret);
}
