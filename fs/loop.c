/* SPDX-License-Identifier: MIT */
/*
 * loop.c - the FUSE loop: one receiving thread reads every request from
 * /dev/fuse and serves those that never wait itself (lookups, attributes,
 * opens, listings, polls, reads of files rendered from memory, reads of a
 * write's outcome, releases); every request that may wait (a write, which
 * commits and fsyncs; a claim's flush and release; a read rendered from
 * SQLite or by any other writable handle; a directory change) goes to a
 * pool of workers, started as they
 * are needed up to max_workers, the most recently idle woken first.
 *
 * Why not libfuse's multi-threaded loop: its idle workers all wait in the
 * kernel's request queue, which wakes the one that waited longest, so a
 * lone reader's every request lands on a cold thread, often on the other
 * CPU; one thread that keeps reading stays warm, and a reader's OPEN costs
 * what a one-thread server's does (docs/architecture.md, "What the round
 * trip itself costs").  One thread alone would make every reader wait
 * behind a commit's fsync and keep concurrent writers from sharing a
 * commit: hence the workers, which never read /dev/fuse.
 *
 * What the receiving thread must never do: wait on a commit, the store's
 * write_lock, a handle's lock that a writer may hold across a commit, or
 * the notifier (which waits for READs in flight, which only this thread
 * reads).  request_waits() is the one place that decides; a read that
 * might repair an unavailable store is handed off there, and handle.c
 * never repairs on this thread (loop_on_receiver()).
 *
 * Between requests the receiving thread polls /dev/fuse for LOOP_SPIN_NS
 * before it blocks in read(2) (await_request()).
 *
 * Bounds: the requests handed off and not yet taken hold at most
 * LOOP_QUEUE_BYTES (one larger request alone is let through); past it the
 * receiving thread waits for a worker to take one, and the kernel holds
 * the rest, as it did with every libfuse worker busy.
 *
 * Locks: `lock` (row 12 of the lock table, docs/architecture.md) is a
 * leaf, held only to queue, dequeue and pick a worker.
 */
#include "fs/vffs-internal.h"

#include <errno.h>
#include <linux/fuse.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define LOOP_QUEUE_BYTES (16u << 20)
#define LOOP_SPIN_NS (INT64_C(50) * 1000) /* how long the receiver looks before it sleeps */

/* One request handed off: its bytes as read from /dev/fuse. */
struct loop_job {
	struct loop_job *next;
	size_t size;
	char data[];
};

struct loop_worker {
	struct loop *loop;
	pthread_t thread;
	pthread_cond_t wake; /* with the loop's lock: a job, or the stop */
	struct loop_worker *next_idle;
	bool idle;    /* on the idle stack */
	bool started; /* thread joinable */
};

struct loop {
	struct vffs *fs;
	struct fuse_session *se;
	pthread_mutex_t lock; /* row 12: the queue, the idle stack, stopping */
	pthread_cond_t space; /* with lock: the receiver waits for room in the queue */
	struct loop_job *head, **tail;
	size_t queued_bytes;
	bool space_wanted;
	struct loop_worker *idle; /* most recently idle first */
	struct loop_worker *workers;
	unsigned started, max; /* slots tried, slots there are */
	unsigned running;      /* workers whose thread started */
	bool stopping;
};

static _Thread_local bool receiver_thread;

bool loop_on_receiver(void)
{
	return receiver_thread;
}

/* The handle a READ or RELEASE names: the fh we gave at its open. */
static const struct vhandle *request_handle(const char *arg)
{
	uint64_t fh;

	memcpy(&fh, arg, sizeof(fh)); /* fuse_read_in and fuse_release_in begin with fh */
	return (const struct vhandle *)(uintptr_t)fh;
}

/* Whether a request may wait (on a commit, a lock held across one, a
 * repair): then a worker serves it.  What vffs_ops answers from memory, and
 * every opcode libfuse answers itself (ENOSYS: STATX, xattrs, locks ...),
 * is served here; an op added to vffs_ops that may wait must be named. */
static bool request_waits(struct vffs *fs, const char *data, size_t size)
{
	const struct fuse_in_header *in = (const struct fuse_in_header *)data;
	const char *arg = data + sizeof(*in);
	const struct vhandle *h;

	switch (in->opcode) {
	case FUSE_WRITE:  /* a commit */
	case FUSE_FLUSH:  /* a claim's commit */
	case FUSE_CREATE: /* a claim's reservation */
	case FUSE_MKNOD:
	case FUSE_UNLINK: /* a claim's release */
	case FUSE_MKDIR:  /* registrations */
	case FUSE_RMDIR:
	case FUSE_FSYNC:
		return true;
	case FUSE_READ:
		if (size < sizeof(*in) + sizeof(struct fuse_read_in))
			return true;
		h = request_handle(arg);
		/* From memory and by a handle no writer holds; a placement file
		 * of an unavailable store may be repaired by the read. */
		return !h->read_inline || !store_status(fs->store, NULL, 0);
	case FUSE_RELEASE:
		if (size < sizeof(*in) + sizeof(struct fuse_release_in))
			return true;
		h = request_handle(arg);
		return h->kind == VN_CLAIM; /* a bare claim commits at its release */
	default:
		return false;
	}
}

static void serve_job(struct loop *l, struct loop_job *job)
{
	struct fuse_buf buf = { .mem = job->data, .size = job->size };

	fuse_session_process_buf(l->se, &buf);
	free(job);
}

static void *worker_main(void *arg)
{
	struct loop_worker *w = arg;
	struct loop *l = w->loop;

	pthread_mutex_lock(&l->lock);
	for (;;) {
		struct loop_job *job;

		while (!l->head && !l->stopping) {
			if (!w->idle) {
				w->idle = true;
				w->next_idle = l->idle;
				l->idle = w;
			}
			pthread_cond_wait(&w->wake, &l->lock);
		}
		if (w->idle) {
			/* woken by no hand-off (spuriously): off the stack, or a
			 * hand-off would pick this busy worker */
			struct loop_worker **p = &l->idle;
			while (*p != w)
				p = &(*p)->next_idle;
			*p = w->next_idle;
			w->idle = false;
		}
		job = l->head;
		if (!job)
			break; /* stopping, and the queue is drained */
		l->head = job->next;
		if (!l->head)
			l->tail = &l->head;
		l->queued_bytes -= job->size;
		if (l->space_wanted)
			pthread_cond_signal(&l->space);
		pthread_mutex_unlock(&l->lock);

		serve_job(l, job);
		pthread_mutex_lock(&l->lock);
	}
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

/* Queue a copy of the request for a worker; -ENOMEM: the caller serves it. */
static int hand_off(struct loop *l, const struct fuse_buf *buf)
{
	struct loop_job *job = malloc(sizeof(*job) + buf->size);
	struct loop_worker *spawn = NULL;

	if (!job)
		return -ENOMEM;
	job->next = NULL;
	job->size = buf->size;
	memcpy(job->data, buf->mem, buf->size);

	pthread_mutex_lock(&l->lock);
	while (l->queued_bytes && l->queued_bytes + job->size > LOOP_QUEUE_BYTES) {
		l->space_wanted = true;
		pthread_cond_wait(&l->space, &l->lock);
	}
	l->space_wanted = false;
	*l->tail = job;
	l->tail = &job->next;
	l->queued_bytes += job->size;
	if (l->idle) {
		struct loop_worker *w = l->idle;

		l->idle = w->next_idle;
		w->idle = false;
		pthread_cond_signal(&w->wake);
	} else if (l->started < l->max) {
		spawn = &l->workers[l->started++];
	}
	pthread_mutex_unlock(&l->lock);

	if (spawn) {
		sigset_t all, old;
		int r;

		/* Born with every signal blocked: SIGUSR1 is the receiver's alone. */
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		r = pthread_create(&spawn->thread, NULL, worker_main, spawn);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_mutex_lock(&l->lock);
		spawn->started = r == 0;
		l->running += r == 0;
		bool none = l->running == 0;
		pthread_mutex_unlock(&l->lock);
		if (r) {
			log_warn("cannot start a FUSE worker: %s", strerror(r));
			if (none)
				return -EAGAIN; /* nobody would take the queue */
		}
	}
	return 0;
}

/* With no worker at all, the receiving thread empties the queue itself. */
static void serve_queue_here(struct loop *l)
{
	for (;;) {
		pthread_mutex_lock(&l->lock);
		struct loop_job *job = l->head;
		if (job) {
			l->head = job->next;
			if (!l->head)
				l->tail = &l->head;
			l->queued_bytes -= job->size;
		}
		pthread_mutex_unlock(&l->lock);
		if (!job)
			return;
		serve_job(l, job);
	}
}

/* Look for the next request awake for a while before the read that sleeps:
 * a reader's next request follows its reply within microseconds, and on a
 * virtual machine a thread woken on a vCPU that went idle meanwhile costs
 * more than the round trip itself (docs/benchmarks.md: a read of
 * VF/quarantined 70 us against 21 us).  Bounded: at most LOOP_SPIN_NS of
 * CPU per request, none while no request comes. */
static void await_request(struct fuse_session *se)
{
	struct pollfd pfd = { .fd = fuse_session_fd(se), .events = POLLIN };
	int64_t until = monotonic_ns() + LOOP_SPIN_NS;

	while (poll(&pfd, 1, 0) == 0 && monotonic_ns() < until)
		;
}

int loop_run(struct vffs *fs, unsigned max_workers)
{
	struct loop l = { .fs = fs, .se = fs->se, .max = max_workers ? max_workers : 1 };
	struct fuse_buf buf = { 0 };
	int r = 0;

	l.workers = calloc(l.max, sizeof(*l.workers));
	if (!l.workers)
		return -ENOMEM;
	pthread_mutex_init(&l.lock, NULL);
	pthread_cond_init(&l.space, NULL);
	l.tail = &l.head;
	for (unsigned i = 0; i < l.max; i++) {
		l.workers[i].loop = &l;
		pthread_cond_init(&l.workers[i].wake, NULL);
	}
	receiver_thread = true;

	while (!fuse_session_exited(fs->se)) {
		await_request(fs->se);
		r = fuse_session_receive_buf(fs->se, &buf);
		if (r == -EINTR)
			continue;
		if (r <= 0)
			break;
		if (!(buf.flags & FUSE_BUF_IS_FD) && request_waits(fs, buf.mem, buf.size)) {
			int h = hand_off(&l, &buf);

			if (h == 0)
				continue;
			if (h == -EAGAIN) {
				serve_queue_here(&l);
				continue;
			}
		}
		fuse_session_process_buf(fs->se, &buf);
	}
	free(buf.mem);

	pthread_mutex_lock(&l.lock);
	l.stopping = true;
	for (unsigned i = 0; i < l.started; i++)
		pthread_cond_signal(&l.workers[i].wake);
	pthread_mutex_unlock(&l.lock);
	for (unsigned i = 0; i < l.started; i++)
		if (l.workers[i].started)
			pthread_join(l.workers[i].thread, NULL);
	serve_queue_here(&l); /* what no worker could take (none started) */
	for (unsigned i = 0; i < l.max; i++)
		pthread_cond_destroy(&l.workers[i].wake);
	pthread_cond_destroy(&l.space);
	pthread_mutex_destroy(&l.lock);
	free(l.workers);
	receiver_thread = false;
	return r < 0 ? r : 0;
}
