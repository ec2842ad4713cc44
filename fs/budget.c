/* SPDX-License-Identifier: MIT */
/*
 * budget.c - the reader memory budget (budget.h).  The uids that hold
 * something are a small array searched linearly: a uid is in it only while
 * one of its open files holds bytes, and the users of one host are few.
 */
#include "fs/budget.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include "common/parse.h"

struct uid_held {
	uid_t uid;
	size_t bytes;
};

struct budget {
	pthread_mutex_t lock;
	size_t total_max;
	size_t per_uid_max;
	size_t total; /* every uid but 0 */
	struct uid_held *uids;
	size_t count, capacity;
	int64_t last_log_ns[2]; /* [uid_spent] */
	bool logged[2];
};

int budget_new(size_t total_max, size_t per_uid_max, struct budget **ret)
{
	struct budget *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	pthread_mutex_init(&b->lock, NULL);
	b->total_max = total_max;
	b->per_uid_max = per_uid_max;
	*ret = b;
	return 0;
}

void budget_free(struct budget *b)
{
	if (!b)
		return;
	pthread_mutex_destroy(&b->lock);
	free(b->uids);
	free(b);
}

static struct uid_held *find(struct budget *b, uid_t uid)
{
	for (size_t i = 0; i < b->count; i++)
		if (b->uids[i].uid == uid)
			return &b->uids[i];
	return NULL;
}

int budget_charge(struct budget *b, uid_t uid, size_t bytes, bool *ret_uid_spent)
{
	struct uid_held *u;
	size_t held;
	int r = 0;

	if (ret_uid_spent)
		*ret_uid_spent = false;
	if (bytes == 0)
		return 0;
	pthread_mutex_lock(&b->lock);
	u = find(b, uid);
	held = u ? u->bytes : 0;
	if (bytes > b->per_uid_max || held > b->per_uid_max - bytes) {
		if (ret_uid_spent)
			*ret_uid_spent = true;
		r = -ENOBUFS;
	} else if (uid != 0 && (bytes > b->total_max || b->total > b->total_max - bytes)) {
		r = -ENOBUFS;
	} else if (!u) {
		if (b->count == b->capacity) {
			size_t cap = b->capacity ? 2 * b->capacity : 8;
			struct uid_held *grown = realloc(b->uids, cap * sizeof(*grown));

			if (!grown) {
				r = -ENOMEM;
				goto out;
			}
			b->uids = grown;
			b->capacity = cap;
		}
		u = &b->uids[b->count++];
		u->uid = uid;
		u->bytes = 0;
	}
	if (r == 0) {
		u->bytes += bytes;
		if (uid != 0)
			b->total += bytes;
	}
out:
	pthread_mutex_unlock(&b->lock);
	return r;
}

void budget_release(struct budget *b, uid_t uid, size_t bytes)
{
	struct uid_held *u;

	if (bytes == 0)
		return;
	pthread_mutex_lock(&b->lock);
	u = find(b, uid);
	if (u) {
		if (bytes > u->bytes)
			bytes = u->bytes; /* never more than it holds */
		u->bytes -= bytes;
		if (uid != 0)
			b->total -= bytes;
		if (u->bytes == 0)
			*u = b->uids[--b->count];
	}
	pthread_mutex_unlock(&b->lock);
}

size_t budget_held(struct budget *b, uid_t uid)
{
	struct uid_held *u;
	size_t held;

	pthread_mutex_lock(&b->lock);
	u = find(b, uid);
	held = u ? u->bytes : 0;
	pthread_mutex_unlock(&b->lock);
	return held;
}

size_t budget_total(struct budget *b)
{
	size_t total;

	pthread_mutex_lock(&b->lock);
	total = b->total;
	pthread_mutex_unlock(&b->lock);
	return total;
}

bool budget_log_due(struct budget *b, bool uid_spent, int64_t now_ns)
{
	int k = uid_spent ? 1 : 0;
	bool due;

	pthread_mutex_lock(&b->lock);
	due = !b->logged[k] ||
	      now_ns - b->last_log_ns[k] >= (int64_t)BUDGET_LOG_INTERVAL_S * NSEC_PER_SEC;
	if (due) {
		b->logged[k] = true;
		b->last_log_ns[k] = now_ns;
	}
	pthread_mutex_unlock(&b->lock);
	return due;
}
