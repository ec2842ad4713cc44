/* SPDX-License-Identifier: MIT */
/*
 * sd-notify.c - READY=1 and STATUS= to $NOTIFY_SOCKET (sd-notify.h).
 *
 * Threads: sd_notifier_ready() runs on the main thread; the status hook on
 * whichever store thread changed availability.  Locks: `lock` (D1 in
 * docs/architecture.md's lock table) is a leaf: the state is read first,
 * with no lock of ours held (store_status() takes the store's own locks),
 * and the lock is taken only to compare that text with the last one sent,
 * send it (one non-blocking sendto) and record it.  Two hooks racing may
 * send in the other order than they read; so a hook that sent re-reads the
 * state and goes again until what it last saw was sent: the last message
 * always shows the latest state.
 */
#include "daemon/sd-notify.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "store/store.h"

#define STATUS_MAX (STORE_REASON_MAX + 64)

struct sd_notifier {
	struct sockaddr_un addr;
	socklen_t addr_len; /* 0: no $NOTIFY_SOCKET */
	pthread_mutex_t lock;
	struct store *store; /* set by ready; NULL before */
	char last[STATUS_MAX]; /* the STATUS= text last sent */
};

int sd_notifier_new(struct sd_notifier **ret)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sd_notifier *n = calloc(1, sizeof(*n));
	size_t len;

	if (!n)
		return -ENOMEM;
	pthread_mutex_init(&n->lock, NULL);
	*ret = n;
	if (!path || !*path)
		return 0;
	len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(n->addr.sun_path))
		return -EINVAL; /* n stays, and says nothing */
	n->addr.sun_family = AF_UNIX;
	memcpy(n->addr.sun_path, path, len);
	if (n->addr.sun_path[0] == '@')
		n->addr.sun_path[0] = '\0'; /* abstract namespace */
	n->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	return 0;
}

void sd_notifier_free(struct sd_notifier *n)
{
	if (!n)
		return;
	pthread_mutex_destroy(&n->lock);
	free(n);
}

static int send_message(const struct sd_notifier *n, const char *msg)
{
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return negative_errno();
	if (sendto(fd, msg, strlen(msg), MSG_NOSIGNAL | MSG_DONTWAIT,
		   (const struct sockaddr *)&n->addr, n->addr_len) < 0)
		return negative_errno();
	return 0;
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

int sd_notifier_ready(struct sd_notifier *n, struct store *store)
{
	char text[STATUS_MAX], msg[STATUS_MAX + 64];
	int r = 0;

	status_text(store, text, sizeof(text));
	pthread_mutex_lock(&n->lock);
	n->store = store;
	memcpy(n->last, text, sizeof(text));
	if (n->addr_len) {
		snprintf(msg, sizeof(msg), "READY=1\nMAINPID=%d\nSTATUS=%s\n", (int)getpid(),
			 n->last);
		r = send_message(n, msg);
	}
	pthread_mutex_unlock(&n->lock);
	/* A transition between the read and the lock: its hook found no store
	 * yet, so say it now. */
	sd_notifier_status_changed(n);
	return r;
}

void sd_notifier_status_changed(void *userdata)
{
	struct sd_notifier *n = userdata;
	char text[STATUS_MAX], msg[STATUS_MAX + 16];
	struct store *store;
	bool sent;
	int r = 0;

	pthread_mutex_lock(&n->lock);
	store = n->addr_len ? n->store : NULL;
	pthread_mutex_unlock(&n->lock);
	if (!store)
		return;
	do {
		status_text(store, text, sizeof(text));
		sent = false;
		pthread_mutex_lock(&n->lock);
		if (strcmp(text, n->last) != 0) {
			snprintf(msg, sizeof(msg), "STATUS=%s\n", text);
			r = send_message(n, msg);
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
