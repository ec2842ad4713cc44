/* SPDX-License-Identifier: MIT */
/*
 * sd-notify.c - READY=1 and STATUS= through sd_notify(3) (sd-notify.h).
 *
 * Threads: sd_notifier_ready() runs on the main thread; its store subscriber on
 * whichever store thread changed availability.  Locks: `lock` (D1 in
 * docs/architecture.md's lock table) is a leaf: the state is read first,
 * with no lock of ours held (store_status() takes the store's own locks),
 * and the lock is taken only to compare that text with the last one sent,
 * send it (sd_notify(3): one datagram) and record it.  Two hooks racing may
 * send in the other order than they read; so a hook that sent re-reads the
 * state and goes again until what it last saw was sent: the last message
 * always shows the latest state.
 */
#include "daemon/sd-notify.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "common/log.h"
#include "store/store.h"

#define STATUS_MAX (STORE_REASON_MAX + 64)

struct sd_notifier {
	bool enabled; /* $NOTIFY_SOCKET is set */
	pthread_mutex_t lock;
	struct store *store;   /* set by ready; NULL before */
	char last[STATUS_MAX]; /* the STATUS= text last sent */
};

int sd_notifier_new(struct sd_notifier **ret)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sd_notifier *n = calloc(1, sizeof(*n));

	if (!n)
		return -ENOMEM;
	pthread_mutex_init(&n->lock, NULL);
	n->enabled = path && *path;
	*ret = n;
	return 0;
}

void sd_notifier_free(struct sd_notifier *n)
{
	if (!n)
		return;
	pthread_mutex_destroy(&n->lock);
	free(n);
}

/* The store's state as STATUS= shows it (no lock of ours held). */
static void status_text(struct store *store, char *buf, size_t size)
{
	char reason[STORE_REASON_MAX];

	if (store_status(store, reason, sizeof(reason)))
		snprintf(buf, size, "store available");
	else
		snprintf(buf, size, "store unavailable: %s", reason);
}

/* sd_notify(3) says 0 when $NOTIFY_SOCKET is unset (ruled out by enabled),
 * > 0 when sent. */
static void status_changed(struct sd_notifier *n);

static int notify_result(int r)
{
	return r < 0 ? r : 0;
}

int sd_notifier_ready(struct sd_notifier *n, struct store *store)
{
	char text[STATUS_MAX];
	int r = 0;

	status_text(store, text, sizeof(text));
	pthread_mutex_lock(&n->lock);
	n->store = store;
	memcpy(n->last, text, sizeof(text));
	if (n->enabled)
		r = notify_result(
			sd_notifyf(0, "READY=1\nMAINPID=%d\nSTATUS=%s", (int)getpid(), n->last));
	pthread_mutex_unlock(&n->lock);
	/* A transition between the read and the lock: its hook found no store
	 * yet, so say it now. */
	status_changed(n);
	return r;
}

static void status_changed(struct sd_notifier *n)
{
	char text[STATUS_MAX];
	struct store *store;
	bool sent;
	int r = 0;

	pthread_mutex_lock(&n->lock);
	store = n->enabled ? n->store : NULL;
	pthread_mutex_unlock(&n->lock);
	if (!store)
		return;
	do {
		status_text(store, text, sizeof(text));
		sent = false;
		pthread_mutex_lock(&n->lock);
		if (strcmp(text, n->last) != 0) {
			r = notify_result(sd_notifyf(0, "STATUS=%s", text));
			if (r == 0) {
				memcpy(n->last, text, sizeof(text));
				sent = true;
			}
		}
		pthread_mutex_unlock(&n->lock);
	} while (sent);
	if (r < 0)
		log_debug("cannot send STATUS= to $NOTIFY_SOCKET: %s", strerror(-r));
}

void sd_notifier_store_changed(void *userdata, const struct store_change *change)
{
	if (change->bits & STORE_CHANGE_STATUS)
		status_changed(userdata);
}
