/* SPDX-License-Identifier: MIT */
/*
 * toucher.c - inotify events for the virtual files: the toucher process,
 * which writes through the mount, and the paced feeder thread, which hands
 * it the files that changed (notify-internal.h).
 *
 * Why a process: a daemon thread blocked in open() on its own mount cannot
 * die.  If vfhealthd is SIGKILLed after a worker has taken that request, the
 * thread waits uninterruptibly for a reply nobody will send, and as it keeps
 * the process's file table (so the /dev/fuse descriptor) alive, the kernel
 * never aborts the connection: the process never finishes dying and every
 * client of the mount hangs.  The toucher holds no /dev/fuse descriptor
 * (it closes every inherited one), so the daemon always dies, the
 * connection aborts, and a toucher caught in a request gets ENOTCONN and
 * dies of its PR_SET_PDEATHSIG.  It is forked in notifier_start(), before
 * the threads and the FUSE loop exist, reads one path per line from a
 * socket pair, and exits at EOF or when the daemon dies.
 *
 * The feeder sends each file of its set to the toucher, which opens it
 * through the mount, writes one byte and closes it: the kernel turns that
 * into IN_MODIFY and IN_CLOSE_WRITE for watchers of the file and of its
 * directory, and drops the file's cached mtime (the kernel does after every
 * write), so a watcher's stat shows the change.  The open and write reach
 * our own FUSE handlers, which see the toucher's pid
 * (notifier_writer_pid()) and change nothing.  The feeder is paced: the
 * first change after a quiet spell is touched at once, and whatever changes
 * before the next batch is due joins it.  The pace starts at
 * NOTIFY_TOUCH_PACE_MS and doubles with every batch that had to wait for
 * it, up to NOTIFY_TOUCH_PACE_MAX_MS; a whole pace without a change starts
 * it over.  So a file changing 1000 times a second costs about 10 touches,
 * not 1000: each touch is three FUSE requests and a wake-up of the toucher,
 * which a steady writer would otherwise pay every few reports.  A change
 * after a quiet spell, and the next one soon after (a report's files, then
 * the quarantine it caused), still go out at once and 10 ms later, and the
 * last change is always followed by one.  The socket to the toucher may
 * fill up: then the feeder waits, holding no lock; the notifier never
 * does.  touch_lock (a leaf) guards the feeder's set.
 */
#include "common/parse.h"
#include "fs/notify-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fs/vfiles.h"
#include "common/child.h"
#include "common/cleanup.h"
#include "common/log.h"

#define TOUCH_BATCH_MAX 256 /* distinct paths the toucher coalesces at once */
#define PACE_MIN_NS (NOTIFY_TOUCH_PACE_MS * INT64_C(1000000))
#define PACE_MAX_NS (NOTIFY_TOUCH_PACE_MAX_MS * INT64_C(1000000))

/* Make the kernel emit IN_MODIFY and IN_CLOSE_WRITE: have the toucher write
 * one byte through the mount.  Our write handler recognizes it and ignores it. */
static void touch_through_mount(struct notifier *n, const struct notify_key *key)
{
	char line[PATH_MAX];
	int len = snprintf(line, sizeof(line), "%s/", n->mountpoint), rest;

	if (len <= 0 || (size_t)len >= sizeof(line) || n->touch_fd < 0)
		return;
	rest = key_path(key, line + len, sizeof(line) - (size_t)len - 1);
	if (rest <= 0 || (size_t)len + (size_t)rest >= sizeof(line) - 1)
		return;
	len += rest;
	line[len++] = '\n';
	for (size_t sent = 0; sent < (size_t)len;) {
		/* MSG_NOSIGNAL: a dead helper is an error here, not a SIGPIPE. */
		ssize_t w = send(n->touch_fd, line + sent, (size_t)len - sent, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (!n->touch_failed)
				log_warn(
					"notifier: the inotify helper is gone (%s); inotify watchers miss changes",
					strerror(errno));
			n->touch_failed = true;
			return;
		}
		sent += (size_t)w;
	}
}

/* Open each path O_WRONLY, write a byte, close. */
static void touch_paths(const char *const *paths, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int fd = open(paths[i], O_WRONLY | O_CLOEXEC | O_NOCTTY);

		/* ENOENT: the VF (or GPU) went away meanwhile; nobody can watch it
		 * any more. */
		if (fd >= 0) {
			if (write(fd, "\n", 1) < 0) {
				/* nothing to do: the watchers miss this one */
			}
			close(fd);
		}
	}
}

/* The toucher: one path per line; each distinct path of what has arrived is
 * touched once. */
static _Noreturn void toucher_main(int in_fd)
{
	char buf[2 * PATH_MAX];
	size_t len = 0;

	for (;;) {
		ssize_t n = read(in_fd, buf + len, sizeof(buf) - len);
		char *start = buf, *nl;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0); /* EOF: the notifier stopped (or died) */
		len += (size_t)n;
		/* Coalesce: every path queued by now is touched once, however
		 * often it was sent (one IN_MODIFY tells a watcher to re-read;
		 * a second would only cost the mount four more requests). */
		const char *paths[TOUCH_BATCH_MAX];
		size_t n_paths = 0;

		while ((nl = memchr(start, '\n', len - (size_t)(start - buf)))) {
			bool seen = false;

			*nl = '\0';
			for (size_t i = 0; i < n_paths && !seen; i++)
				seen = strcmp(paths[i], start) == 0;
			if (!seen && n_paths == TOUCH_BATCH_MAX) {
				touch_paths(paths, n_paths);
				n_paths = 0;
			}
			if (!seen)
				paths[n_paths++] = start;
			start = nl + 1;
		}
		touch_paths(paths, n_paths);
		len -= (size_t)(start - buf);
		memmove(buf, start, len);
		if (len == sizeof(buf))
			len = 0; /* no newline in a full buffer: cannot be ours */
	}
}

/* Fork the toucher.  Called before any thread of ours exists.  It keeps
 * its signal mask (the daemon's, which leaves SIGTERM to the main thread)
 * and dies with the daemon. */
int toucher_start(struct notifier *n)
{
	_cleanup_close_ int in_fd = -1, out_fd = -1;
	struct child c = CHILD_NONE;
	sigset_t mask;
	int fds[2], r;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
		return negative_errno();
	in_fd = fds[0];
	out_fd = fds[1];
	pthread_sigmask(SIG_SETMASK, NULL, &mask);
	/* 0, 1, 2 and the socket: above all the /dev/fuse descriptor must go
	 * (see the notes) */
	const int keep[] = { 0, 1, 2, in_fd };
	const struct child_opts o = {
		.fds = keep, .n_fds = 4, .pdeathsig = SIGKILL, .sigmask = &mask
	};
	r = child_fork(&o, &c);
	if (r < 0)
		return r;
	if (r == 0)
		toucher_main(3);
	n->touch_fd = move_fd(out_fd);
	atomic_store(&n->writer_pid, (int)c.pid);
	child_release(&c); /* its pid is kept; toucher_stop waits for it */
	return 0;
}

void toucher_stop(struct notifier *n)
{
	struct child c = { .pid = (pid_t)atomic_load(&n->writer_pid), .pidfd = -1 };

	if (n->touch_fd >= 0) {
		close(n->touch_fd);
		n->touch_fd = -1;
	}
	if (c.pid > 0) {
		/* Not left to drain the socket: its paths name files of a mount
		 * about to go away.  Killed inside a request, it just abandons it. */
		if (child_wait(&c, 0, 0, NULL) < 0)
			child_release(&c);
		atomic_store(&n->writer_pid, 0);
	}
}

/* Into the feeder's set: only the first file of a batch wakes it (it waits
 * for a first file, then for its pace). */
void touch_add(struct notifier *n, unsigned top, const char *vf, unsigned files, unsigned all_vfs)
{
	pthread_mutex_lock(&n->touch_lock);
	if (dirty_empty(&n->touch) && !n->touch_pacing)
		pthread_cond_signal(&n->touch_cond);
	dirty_add(&n->touch, top, vf, files, all_vfs);
	pthread_mutex_unlock(&n->touch_lock);
}

void touch_add_gpu(struct notifier *n, const char *gpu, unsigned files)
{
	if (!files)
		return;
	pthread_mutex_lock(&n->touch_lock);
	if (dirty_empty(&n->touch) && !n->touch_pacing)
		pthread_cond_signal(&n->touch_cond);
	dirty_add_gpu(&n->touch, gpu, files);
	pthread_mutex_unlock(&n->touch_lock);
}

void hand_to_feeder(struct notifier *n, const struct dirty_set *d)
{
	touch_add(n, d->top, NULL, 0, d->all_vfs);
	for (size_t v = 0; v < d->count; v++)
		touch_add(n, 0, d->vfs[v].vf, d->vfs[v].files & ~d->all_vfs, 0);
	touch_add_gpu(n, NULL, d->all_gpus);
	for (size_t g = 0; g < d->n_gpus; g++)
		touch_add_gpu(n, d->gpus[g].gpu, d->gpus[g].files & ~d->all_gpus);
}

/* The feeder: sends what changed to the toucher, one path a line, each file
 * of the set once; blocks on the socket (the toucher may be slow), so that
 * the notifier never does. */
void *feeder_main(void *arg)
{
	struct notifier *n = arg;
	struct dirty_set *d = &n->fed;
	int64_t pace_ns = PACE_MIN_NS, next_batch = 0;

	block_signals();
	for (;;) {
		struct dirty_lists lists;
		struct timespec due = { .tv_sec = next_batch / NSEC_PER_SEC,
					.tv_nsec = next_batch % NSEC_PER_SEC };

		pthread_mutex_lock(&n->touch_lock);
		while (!n->touch_stop && dirty_empty(&n->touch))
			pthread_cond_wait(&n->touch_cond, &n->touch_lock);
		/* Paced: what changes before the next batch is due joins it, so
		 * a file changing 1000 times a second costs a touch a pace; a
		 * change meanwhile does not wake us (touch_add()), only the stop. */
		bool busy = monotonic_ns() < next_batch;
		n->touch_pacing = true;
		while (!n->touch_stop &&
		       pthread_cond_timedwait(&n->touch_cond, &n->touch_lock, &due) != ETIMEDOUT)
			;
		n->touch_pacing = false;
		if (n->touch_stop) {
			pthread_mutex_unlock(&n->touch_lock);
			break;
		}
		dirty_take(d, &n->touch);
		pthread_mutex_unlock(&n->touch_lock);
		pace_ns = !busy                     ? PACE_MIN_NS :
			  2 * pace_ns < PACE_MAX_NS ? 2 * pace_ns :
						      PACE_MAX_NS;
		next_batch = monotonic_ns() + pace_ns;
		list_dirty(n, d, false, &lists);
		each_dirty_file(n, d, &lists, true, touch_through_mount);
		dirty_lists_free(&lists);
	}
	return NULL;
}
