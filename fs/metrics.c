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

struct metrics_provider {
	metrics_render_fn render;
	void *userdata;
};

struct metrics {
	pthread_mutex_t lock;
	struct metrics_provider providers[METRICS_MAX_PROVIDERS];
	size_t count;
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
	free(m);
}

int metrics_add_provider(struct metrics *m, metrics_render_fn render, void *userdata)
{
	int r = 0;

	if (!m || !render)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	if (m->count < METRICS_MAX_PROVIDERS)
		m->providers[m->count++] =
			(struct metrics_provider){ .render = render, .userdata = userdata };
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
