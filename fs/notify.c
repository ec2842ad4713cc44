/* SPDX-License-Identifier: MIT */
/*
 * notify.c - change notification for the virtual files (notify.h).
 *
 * Design notes
 * ------------
 * Threads and processes.  One notifier thread, and one single-threaded
 * helper process (the "toucher") that does the notifier's writes through
 * the mount.  The store calls notifier_store_change() from whichever thread
 * committed (usually a FUSE worker handling a write); FUSE workers call the
 * watch/poll/seen/mtime functions.
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
 * the notifier thread and the FUSE loop exist, reads one path per line from
 * a socket pair, and exits at EOF or when the daemon dies.
 *
 * Locks: rows 7 and 8 of the lock table in docs/architecture.md; neither is
 * held across any call into the store or the mount.
 *  - files_lock guards the file table: per file (VF address + table index)
 *    the content generation, the mtime, and the list of open-file watches
 *    with their pending fuse_pollhandle.  Held for a few pointer operations.
 *  - queue_lock (a leaf) guards the dirty set: a bitmask of top-level files,
 *    a bitmask of per-VF files dirty for every VF, and up to
 *    NOTIFY_MAX_QUEUED_VFS (VF, bitmask) entries; when those are full the
 *    set collapses into "every notified file of every VF".  Enqueueing never
 *    blocks and never allocates.
 *
 * The notifier drains the whole set at once, then per file: bumps the
 * generation and takes the pending poll handles (under files_lock), sends
 * fuse_lowlevel_notify_poll() for them (no lock held; a write to /dev/fuse
 * that waits for nobody), and hands the file's path to the toucher, which
 * opens the file through the mount, writes one byte and closes it: the
 * kernel turns that into IN_MODIFY and IN_CLOSE_WRITE for watchers of the
 * file and of its directory (each distinct path the toucher has read by
 * then is touched once: a burst of changes costs one touch per file).  The
 * open and write reach our own FUSE
 * handlers, which see the toucher's pid (notifier_writer_pid()) and change
 * nothing.  The socket to the toucher may fill up: then the notifier thread
 * waits, holding no lock.
 *
 * Shutdown.  notifier_stop() sets `stop`, signals the condition, joins the
 * thread, closes the socket, kills the toucher and waits for it to exit.  It
 * has to run while the session still serves requests, because the toucher
 * may be inside an open() or write() on the mount.  What is still queued is
 * dropped: the thread checks `abandon` between files, so a store-wide change
 * at 65,536 VFs (hundreds of thousands of files, each touched through the
 * mount) does not hold up a SIGTERM, and the touches still in the socket
 * would only tell watchers of a mount that is about to go away.  Pending poll handles are
 * destroyed when their watch is removed or in notifier_free().
 *
 * Memory.  File entries are created when a file is opened or changes and
 * are kept (keyed by VF address, so re-registering a VF reuses them); they
 * number at most the files of every VF address ever used.
 */
#include "fs/notify.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fs/vfiles.h"
#include "proto/cleanup.h"
#include "proto/log.h"

#define FILE_BUCKETS 256
#define TOUCH_BATCH_MAX 256 /* distinct paths the toucher coalesces at once */

struct watched_file {
	struct notify_key key;
	uint64_t generation;
	struct timespec mtime;
	bool changed;
	struct notify_watch *watches;
	struct watched_file *next;
};

struct dirty_vf {
	char vf[VF_ADDR_BUFSZ];
	unsigned files; /* bitmask over enum vf_file_index */
};

struct notifier {
	struct fuse_session *se;
	struct store *store;
	char *mountpoint;

	pthread_mutex_t files_lock;
	struct watched_file *buckets[FILE_BUCKETS];

	pthread_mutex_t queue_lock;
	pthread_cond_t queue_cond;
	unsigned dirty_top;     /* bitmask over enum top_file_index */
	unsigned dirty_all_vfs; /* bitmask over enum vf_file_index, for every VF */
	struct dirty_vf dirty_vfs[NOTIFY_MAX_QUEUED_VFS];
	size_t dirty_vf_count;
	bool stop;
	atomic_bool abandon; /* notifier_stop(): drop the rest of the drained set */

	pthread_t thread;
	bool running;
	int touch_fd;          /* our end of the socket pair to the toucher */
	atomic_int writer_pid; /* the toucher */
	bool touch_failed;     /* logged once */
};

/* Every per-VF file whose content changes get notified. */
static unsigned notified_vf_files(void)
{
	unsigned mask = 0;

	for (int i = 0; i < VF_FILE_COUNT; i++)
		if (vf_files[i].flags & VFILE_NOTIFY)
			mask |= 1u << i;
	return mask;
}

static unsigned key_hash(const struct notify_key *key)
{
	unsigned h = 2166136261u;

	for (const char *p = key->vf; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	h = (h ^ (unsigned)key->index) * 16777619u;
	return h % FILE_BUCKETS;
}

static bool key_equal(const struct notify_key *a, const struct notify_key *b)
{
	return a->index == b->index && strcmp(a->vf, b->vf) == 0;
}

/* Under files_lock. */
static struct watched_file *file_find(struct notifier *n, const struct notify_key *key,
				      bool create)
{
	unsigned h = key_hash(key);
	struct watched_file *f;

	for (f = n->buckets[h]; f; f = f->next)
		if (key_equal(&f->key, key))
			return f;
	if (!create)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->key = *key;
	f->next = n->buckets[h];
	n->buckets[h] = f;
	return f;
}

int notifier_new(struct fuse_session *se, const char *mountpoint, struct store *store,
		 struct notifier **ret)
{
	struct notifier *n = calloc(1, sizeof(*n));

	if (!n)
		return -ENOMEM;
	n->mountpoint = strdup(mountpoint);
	if (!n->mountpoint) {
		free(n);
		return -ENOMEM;
	}
	n->se = se;
	n->store = store;
	n->touch_fd = -1;
	pthread_mutex_init(&n->files_lock, NULL);
	pthread_mutex_init(&n->queue_lock, NULL);
	pthread_cond_init(&n->queue_cond, NULL);
	*ret = n;
	return 0;
}

void notifier_free(struct notifier *n)
{
	if (!n)
		return;
	notifier_stop(n);
	for (int b = 0; b < FILE_BUCKETS; b++) {
		struct watched_file *f = n->buckets[b];
		while (f) {
			struct watched_file *next = f->next;
			for (struct notify_watch *w = f->watches; w; w = w->next)
				if (w->pending) {
					fuse_pollhandle_destroy(w->pending);
					w->pending = NULL;
				}
			free(f);
			f = next;
		}
	}
	pthread_cond_destroy(&n->queue_cond);
	pthread_mutex_destroy(&n->queue_lock);
	pthread_mutex_destroy(&n->files_lock);
	free(n->mountpoint);
	free(n);
}

pid_t notifier_writer_pid(const struct notifier *n)
{
	return (pid_t)atomic_load(&((struct notifier *)n)->writer_pid);
}

/* -- the dirty set -------------------------------------------------------------- */

/* Under queue_lock. */
static void queue_vf(struct notifier *n, const char *vf, unsigned files)
{
	for (size_t i = 0; i < n->dirty_vf_count; i++)
		if (strcmp(n->dirty_vfs[i].vf, vf) == 0) {
			n->dirty_vfs[i].files |= files;
			return;
		}
	if (n->dirty_vf_count == NOTIFY_MAX_QUEUED_VFS) {
		/* Full: merge everything into "all files of all VFs"; nothing is lost. */
		unsigned all = 0;
		for (size_t i = 0; i < n->dirty_vf_count; i++)
			all |= n->dirty_vfs[i].files;
		n->dirty_all_vfs |= all | files;
		n->dirty_vf_count = 0;
		return;
	}
	snprintf(n->dirty_vfs[n->dirty_vf_count].vf, VF_ADDR_BUFSZ, "%s", vf);
	n->dirty_vfs[n->dirty_vf_count].files = files;
	n->dirty_vf_count++;
}

static void enqueue(struct notifier *n, unsigned top, const char *vf, unsigned vf_mask,
		    unsigned all_vfs)
{
	if (!top && !all_vfs && (!vf_mask || !vf || !*vf))
		return;
	pthread_mutex_lock(&n->queue_lock);
	n->dirty_top |= top;
	n->dirty_all_vfs |= all_vfs;
	if (vf_mask && vf && *vf)
		queue_vf(n, vf, vf_mask);
	pthread_cond_signal(&n->queue_cond);
	pthread_mutex_unlock(&n->queue_lock);
}

/* The files of table[count] that a change with these bits dirties: the
 * table's `changes` column (vfiles.h) is the one map from store changes to
 * files. */
static unsigned dirtied_files(const struct vfile *table, int count, unsigned bits)
{
	unsigned mask = 0;

	for (int i = 0; i < count; i++)
		if ((table[i].flags & VFILE_NOTIFY) && (table[i].changes & bits))
			mask |= 1u << i;
	return mask;
}

void notifier_store_change(void *userdata, const struct store_change *change)
{
	struct notifier *n = userdata;
	unsigned top = dirtied_files(top_files, TOP_FILE_COUNT, change->bits);
	unsigned vf = dirtied_files(vf_files, VF_FILE_COUNT, change->bits);

	/* A change that names no VF is store-wide: its per-VF files change
	 * for every VF (vfiles.h). */
	if (change->vf[0])
		enqueue(n, top, change->vf, vf, 0);
	else
		enqueue(n, top, NULL, 0, vf);
}

/* -- the notifier thread ---------------------------------------------------------- */

/* Bump the file's generation and wake its pollers. */
static void wake_pollers(struct notifier *n, const struct notify_key *key)
{
	_cleanup_free_ struct fuse_pollhandle **handles = NULL;
	size_t count = 0, cap = 0;
	struct watched_file *f;

	pthread_mutex_lock(&n->files_lock);
	f = file_find(n, key, true);
	if (f) {
		f->generation++;
		clock_gettime(CLOCK_REALTIME, &f->mtime);
		f->changed = true;
		for (struct notify_watch *w = f->watches; w; w = w->next)
			if (w->pending)
				cap++;
		if (cap)
			handles = calloc(cap, sizeof(*handles));
		for (struct notify_watch *w = f->watches; handles && w; w = w->next)
			if (w->pending) {
				handles[count++] = w->pending;
				w->pending = NULL;
			}
	}
	pthread_mutex_unlock(&n->files_lock);
	if (!f)
		log_warn("notifier: out of memory; pollers of %s%s%s miss a change", key->vf,
			 key->vf[0] ? "/" : "", key->vf[0] ? vf_files[key->index].name
							  : top_files[key->index].name);
	for (size_t i = 0; i < count; i++) {
		int r = fuse_lowlevel_notify_poll(handles[i]);
		if (r < 0 && r != -ENOENT)
			log_debug("notifier: poll notification failed: %s", strerror(-r));
		fuse_pollhandle_destroy(handles[i]);
	}
}

/* Make the kernel emit IN_MODIFY and IN_CLOSE_WRITE: have the toucher write
 * one byte through the mount.  Our write handler recognizes it and ignores it. */
static void touch_through_mount(struct notifier *n, const struct notify_key *key)
{
	char line[PATH_MAX];
	int len;

	if (key->vf[0])
		len = snprintf(line, sizeof(line), "%s/%s/%s\n", n->mountpoint, key->vf,
			       vf_files[key->index].name);
	else
		len = snprintf(line, sizeof(line), "%s/%s\n", n->mountpoint,
			       top_files[key->index].name);
	if (len <= 0 || (size_t)len >= sizeof(line) || n->touch_fd < 0)
		return;
	for (size_t sent = 0; sent < (size_t)len;) {
		/* MSG_NOSIGNAL: a dead helper is an error here, not a SIGPIPE. */
		ssize_t w = send(n->touch_fd, line + sent, (size_t)len - sent, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (!n->touch_failed)
				log_warn("notifier: the inotify helper is gone (%s); inotify watchers miss changes",
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

		/* ENOENT: the VF went away meanwhile; nobody can watch it any more. */
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

/* Fork the toucher.  Called before any thread of ours exists. */
static int toucher_start(struct notifier *n)
{
	int fds[2];
	pid_t parent = getpid(), pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
		return negative_errno();
	pid = fork();
	if (pid < 0) {
		int r = negative_errno();
		close(fds[0]);
		close(fds[1]);
		return r;
	}
	if (pid == 0) {
		int in_fd = fds[0];
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		/* Above all the /dev/fuse descriptor must go (see the notes). */
		if (in_fd > 3)
			close_range(3, (unsigned)in_fd - 1, 0);
		close_range((unsigned)in_fd + 1, ~0U, 0);
		toucher_main(in_fd);
	}
	close(fds[0]);
	n->touch_fd = fds[1];
	atomic_store(&n->writer_pid, (int)pid);
	return 0;
}

static void toucher_stop(struct notifier *n)
{
	pid_t pid = (pid_t)atomic_load(&n->writer_pid);

	if (n->touch_fd >= 0) {
		close(n->touch_fd);
		n->touch_fd = -1;
	}
	if (pid > 0) {
		/* Not left to drain the socket: its paths name files of a mount
		 * about to go away.  Killed inside a request, it just abandons it. */
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		atomic_store(&n->writer_pid, 0);
	}
}

static void notify_file(struct notifier *n, const char *vf, int index)
{
	struct notify_key key = { .index = index };

	snprintf(key.vf, sizeof(key.vf), "%s", vf);
	wake_pollers(n, &key);
	touch_through_mount(n, &key);
}

static void notify_vf_files(struct notifier *n, const char *vf, unsigned files)
{
	for (int i = 0; i < VF_FILE_COUNT; i++)
		if (files & (1u << i))
			notify_file(n, vf, i);
}

static void *notifier_main(void *arg)
{
	struct notifier *n = arg;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);

	for (;;) {
		_cleanup_free_ struct dirty_vf *vfs = NULL;
		unsigned top, all_vfs;
		size_t vf_count;

		pthread_mutex_lock(&n->queue_lock);
		while (!n->stop && !n->dirty_top && !n->dirty_all_vfs && !n->dirty_vf_count)
			pthread_cond_wait(&n->queue_cond, &n->queue_lock);
		if (n->stop) {
			pthread_mutex_unlock(&n->queue_lock);
			break;
		}
		top = n->dirty_top;
		all_vfs = n->dirty_all_vfs;
		vf_count = n->dirty_vf_count;
		vfs = vf_count ? malloc(vf_count * sizeof(*vfs)) : NULL;
		if (vf_count && !vfs) {
			/* Cannot copy the list: notify everything instead. */
			all_vfs |= notified_vf_files();
			vf_count = 0;
		} else if (vf_count) {
			memcpy(vfs, n->dirty_vfs, vf_count * sizeof(*vfs));
		}
		n->dirty_top = 0;
		n->dirty_all_vfs = 0;
		n->dirty_vf_count = 0;
		pthread_mutex_unlock(&n->queue_lock);

		for (int i = 0; i < TOP_FILE_COUNT; i++)
			if (top & (1u << i))
				notify_file(n, "", i);
		if (all_vfs) {
			_cleanup_free_ struct store_vf_info *list = NULL;
			size_t count = 0;
			if (store_vf_list(n->store, &list, &count) == 0)
				for (size_t i = 0; i < count && !atomic_load(&n->abandon); i++)
					notify_vf_files(n, list[i].vf, all_vfs);
		}
		for (size_t i = 0; i < vf_count && !atomic_load(&n->abandon); i++)
			notify_vf_files(n, vfs[i].vf, vfs[i].files & ~all_vfs);
	}
	return NULL;
}

int notifier_start(struct notifier *n)
{
	int r;

	if (n->running)
		return 0;
	n->stop = false;
	atomic_store(&n->abandon, false);
	n->touch_failed = false;
	r = toucher_start(n);
	if (r < 0) {
		log_err("notifier: cannot start the inotify helper: %s", strerror(-r));
		return r;
	}
	r = pthread_create(&n->thread, NULL, notifier_main, n);
	if (r) {
		toucher_stop(n);
		return -r;
	}
	n->running = true;
	return 0;
}

void notifier_stop(struct notifier *n)
{
	if (!n->running)
		return;
	atomic_store(&n->abandon, true);
	pthread_mutex_lock(&n->queue_lock);
	n->stop = true;
	pthread_cond_signal(&n->queue_cond);
	pthread_mutex_unlock(&n->queue_lock);
	pthread_join(n->thread, NULL);
	toucher_stop(n);
	n->running = false;
}

/* -- watches and poll ---------------------------------------------------------------- */

int notifier_watch_add(struct notifier *n, struct notify_watch *w)
{
	struct watched_file *f;

	pthread_mutex_lock(&n->files_lock);
	f = file_find(n, &w->key, true);
	if (f) {
		w->seen_generation = f->generation;
		w->pending = NULL;
		w->next = f->watches;
		f->watches = w;
	}
	pthread_mutex_unlock(&n->files_lock);
	return f ? 0 : -ENOMEM;
}

void notifier_watch_remove(struct notifier *n, struct notify_watch *w)
{
	struct fuse_pollhandle *pending = NULL;
	struct watched_file *f;

	pthread_mutex_lock(&n->files_lock);
	f = file_find(n, &w->key, false);
	if (f)
		for (struct notify_watch **p = &f->watches; *p; p = &(*p)->next)
			if (*p == w) {
				*p = w->next;
				break;
			}
	pending = w->pending;
	w->pending = NULL;
	pthread_mutex_unlock(&n->files_lock);
	if (pending)
		fuse_pollhandle_destroy(pending);
}

void notifier_seen(struct notifier *n, struct notify_watch *w)
{
	struct watched_file *f;

	pthread_mutex_lock(&n->files_lock);
	f = file_find(n, &w->key, false);
	w->seen_generation = f ? f->generation : 0;
	pthread_mutex_unlock(&n->files_lock);
}

unsigned notifier_poll(struct notifier *n, struct notify_watch *w, struct fuse_pollhandle *ph)
{
	struct fuse_pollhandle *drop = NULL;
	struct watched_file *f;
	unsigned revents = POLLIN | POLLRDNORM;

	pthread_mutex_lock(&n->files_lock);
	f = file_find(n, &w->key, false);
	if (f && f->generation != w->seen_generation) {
		revents |= POLLPRI | POLLERR;
		drop = ph; /* nothing to wait for */
	} else if (ph) {
		/* One pending handle per open file: the kernel's latest one. */
		drop = w->pending;
		w->pending = ph;
	}
	pthread_mutex_unlock(&n->files_lock);
	if (drop)
		fuse_pollhandle_destroy(drop);
	return revents;
}

bool notifier_mtime(struct notifier *n, const struct notify_key *key, struct timespec *ret)
{
	struct watched_file *f;
	bool changed = false;

	pthread_mutex_lock(&n->files_lock);
	f = file_find(n, key, false);
	if (f && f->changed) {
		*ret = f->mtime;
		changed = true;
	}
	pthread_mutex_unlock(&n->files_lock);
	return changed;
}
