/* SPDX-License-Identifier: MIT */
/*
 * loop.c - the FUSE loop: one thread at a time holds the receiving role:
 * it reads every request from /dev/fuse and serves those that never wait
 * itself (lookups, attributes, opens, listings, polls, reads of files
 * rendered from memory, reads of a write's outcome, releases of what is
 * not a claim written, and a report written while a commit is under way,
 * below); a request that may wait is served by another thread.  The
 * threads are the one that runs loop_run() and up to max_workers more,
 * started as they are needed, the most recently idle woken first.
 *
 * The role moves (leader/followers).  The first writer's request in a
 * while is served by the thread that read it, which first lends its watch
 * of /dev/fuse to the most recently idle worker (lend()): /dev/fuse joins
 * that worker's epoll set, and the worker sleeps on.  Only if a request
 * comes before the commit ends does it wake and take the role
 * (lent_take()); else the writer's thread takes /dev/fuse out of the set
 * again, just before a write's reply (loop_lend_end(), op_write()) or
 * after any other's, and goes on receiving (lend_end()).  So a lone
 * writer's report wakes no thread at all, and its next request, the READ
 * of its outcome, finds the receiver awake, while no reader waits behind
 * the commit's fsync.  When the role was taken meanwhile, the writer's
 * thread takes it back after its reply if the new holder sleeps
 * (reclaim()).  While writers' requests are served, a writer's request is
 * queued for a worker, as a reader's always is (below).
 *
 * Why not libfuse's multi-threaded loop: its idle workers all wait in the
 * kernel's request queue, which wakes the one that waited longest, so a
 * lone reader's every request lands on a cold thread, often on the other
 * CPU; one thread that keeps reading stays warm, and a reader's OPEN costs
 * what a one-thread server's does (docs/architecture.md, "What the round
 * trip itself costs").  One thread alone would make every reader wait
 * behind a commit's fsync and keep concurrent writers from sharing a
 * commit: hence a role that moves, and workers.
 *
 * What the thread holding the role must never do: wait on a commit, the
 * store's write_lock, a handle's lock that a writer may hold across a
 * commit, or the notifier (which waits for READs in flight, which only
 * the role's holder reads).  request_class() is the one place that
 * decides, from the operation: the opcode, and for a READ, FLUSH or
 * RELEASE the class its handle was given where it was opened
 * (vhandle.read_class, close_class), for a WRITE whether its handle joins
 * (vhandle.joins) and a commit is under way;
 * a read that might repair an unavailable store is handed off there, and
 * handle.c never repairs on this thread (loop_on_receiver()).
 *
 * A report that finds a commit under way joins the next one
 * (store_report_failure_submit()) and is answered by the store's answerer,
 * so it waits for nothing: the holder serves it itself, which for many
 * writers at once saves a worker's wake-up and a copy of the request on
 * every report.  It takes its handle's lock only if free, the store's
 * state for reading and its queue; a write that cannot join after all
 * (the commit ended, a success report, the joined ops' bound, the handle
 * held by another write) is passed on to a worker (loop_pass_on()), which
 * serves it anew.  A lone writer's report finds no commit under way and
 * goes the writer's way below.
 *
 * Two classes of handed-off requests.  Writers' (WRITE, CREATE, MKNOD,
 * UNLINK, MKDIR, RMDIR, FSYNC, the FLUSH and RELEASE of a claim created
 * or opened for writing: what commits)
 * wait in one FIFO queue, and a worker always takes a writer's request
 * first.  Readers' (READs rendered off this thread: history, failures, the
 * claims listing, metrics ...) wait in one queue per uid, the uid the
 * kernel put in the request's header, served round-robin across uids; at
 * most reader_max workers (max_workers / 2, at least 1) serve readers at
 * once, and at most uid_max (max_workers / 4, at least 1) one uid.  So
 * however many threads one user reads with, she holds at most her share
 * of the workers and her requests wait behind each other, not in front of
 * anyone else's; with max_workers >= 2 a writer's request always finds a
 * worker that no reader holds (tests/adversarial/read-flood.sh: a claim
 * under 32 threads of rendered reads stays within 3x of its baseline).
 * Readers share the CPU with the writers still (a render is SQLite and
 * formatting); the shares bound how many of them run at once.  Nor does
 * a reader hold what a writer waits on across a commit: `history` and
 * `failures` render under the reader's own handle lock and the store's
 * read_lock alone, on its read-only listing connection, which WAL lets
 * read beside a commit (store/listing.c), never write_lock; a writer
 * takes read_lock only to name a quarantine's failed assignments in its
 * log line or to find a claim released already (fs/vfiles.c,
 * fs/claims.c), behind at most the renders under way.
 *
 * Between requests the holder looks at /dev/fuse (non-blocking, loop_new())
 * for LOOP_SPIN_NS after a reader's request, unless a writer's request is
 * being served or a commit is under way, then sleeps in poll(2) on it and
 * on its own eventfd, which a reclaim or the stop (loop_interrupt())
 * writes (next_request()): no signal is involved.
 *
 * Bounds.  Writers' requests handed off and not yet taken hold at most
 * LOOP_QUEUE_BYTES (one larger request alone is let through); past it the
 * holder of the role waits for a worker to take one, and the kernel holds
 * the rest, as it did with every libfuse worker busy: only the writers
 * (root and the writers' group, whom the kernel's permission check lets
 * write) can make it wait, and a worker takes their requests first.
 * Readers' requests are bounded apart, and never make the receiving
 * thread wait, which would stall every writer behind one reader: one uid's
 * queued reads hold at most LOOP_UID_BYTES, and those of every uid but
 * root at most LOOP_QUEUE_BYTES (as the reader budget counts root apart,
 * budget.h); a read past either bound is answered ENOBUFS at once (the
 * reader budget's errno) and logged at most once per LOOP_LOG_INTERVAL_NS.
 * A READ request is 80 bytes, so a uid reaches its bound only with some
 * 13,000 reads waiting at once, that many threads of its own blocked.
 * The uids with reads queued or in service are a list, walked to pick
 * the next: as long as the number of users reading at once.
 *
 * Locks: `lock` (row 12 of the lock table, docs/architecture.md) is a
 * leaf, held only to queue, dequeue, pick a worker, lend the watch and take
 * the role (and to allocate a uid's queue).  An idle worker sleeps with no
 * lock held, in epoll_wait(2) on its wake_fd (which a hand-off, a recall or
 * the stop writes, and which keeps a wake-up that comes before the sleep).
 */
#include "fs/vffs-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define LOOP_QUEUE_BYTES (16u << 20)
#define LOOP_UID_BYTES (1u << 20)
#define LOOP_SPIN_NS (INT64_C(50) * 1000) /* how long the receiver looks before it sleeps */
#define LOOP_LOG_INTERVAL_NS (INT64_C(10) * NSEC_PER_SEC)

struct loop_uid;

/* One request handed off: its bytes as read from /dev/fuse. */
struct loop_job {
	struct loop_job *next;
	struct loop_uid *reader; /* a reader's: its uid's queue, while a worker serves it */
	size_t size;
	char data[];
};

/* One uid's queued reads. */
struct loop_uid {
	struct loop_uid *next;
	uid_t uid;
	struct loop_job *head, **tail;
	size_t bytes;  /* queued */
	unsigned busy; /* workers serving it */
};

struct loop_worker {
	struct loop *loop;
	pthread_t thread;
	struct loop_worker *next_idle;
	int wake_fd;  /* eventfd: the role, a job, a recall or the stop */
	int epoll_fd; /* what it sleeps on while idle: wake_fd, and /dev/fuse while lent the watch */
	bool idle;    /* on the idle stack */
	bool woken;   /* by wake_idle(), and not back yet */
	bool started;         /* thread joinable */
	bool look;            /* look for the next request awake (next_request()) */
	atomic_bool recalled; /* the role was taken back from it (reclaim()) */
};

struct loop {
	struct vffs *fs;
	struct fuse_session *se;
	pthread_mutex_t lock; /* row 12: the queues, the idle stack, the role, stopping */
	pthread_cond_t space; /* with lock: the receiver waits for room for a writer's request */
	struct loop_job *head, **tail; /* writers' */
	size_t queued_bytes;           /* writers' */
	bool space_wanted;
	struct loop_uid *uids; /* readers' queues: uids with reads queued or served */
	struct loop_uid *turn; /* the next to serve (NULL: the first) */
	size_t reader_bytes;   /* queued by every uid but root */
	unsigned readers;      /* workers serving readers */
	unsigned reader_max, uid_max;
	struct loop_worker *idle; /* most recently idle first */
	unsigned waking;          /* workers woken and not back yet */
	struct loop_worker first; /* the thread that runs loop_run() */
	struct loop_worker *workers;
	unsigned started, max;      /* slots tried, slots there are */
	unsigned running;           /* workers whose thread started */
	struct loop_worker *holder; /* the thread holding the receiving role; NULL: none */
	struct loop_worker *lent;   /* off the idle stack, watching /dev/fuse for the holder */
	atomic_bool holder_asleep;  /* ... and it sleeps in its wait for a request */
	bool stopping;
	int result; /* how the session ended: 0 or the receive's -errno */
	/* Writers' requests being served: while any is, the receiver does not
	 * look for the next request awake (next_request()). */
	atomic_uint writers_serving;
	atomic_int_fast64_t refused_logged; /* when a refusal was last logged */
};

static _Thread_local bool receiver_thread;
static _Thread_local bool passed_on;             /* loop_pass_on() */
static _Thread_local struct loop_worker *lender; /* this thread lent the watch (lend()) */

bool loop_on_receiver(void)
{
	return receiver_thread;
}

void loop_pass_on(fuse_req_t req)
{
	passed_on = true;
	fuse_reply_none(req); /* frees it: libfuse keeps nothing of a request */
}

/* The handle a READ, FLUSH or RELEASE names: the fh we gave at its open. */
static const struct vhandle *request_handle(const char *arg)
{
	uint64_t fh;

	/* fuse_read_in, fuse_flush_in and fuse_release_in begin with fh */
	memcpy(&fh, arg, sizeof(fh));
	return (const struct vhandle *)(uintptr_t)fh;
}

/* How a request is served: LOOP_INLINE by the role's holder, else by a
 * worker, as a reader's or a writer's.  What vffs_ops answers from
 * memory, and every opcode libfuse answers itself (ENOSYS: STATX, xattrs,
 * locks ...), is inline; an op added to vffs_ops that may wait must be
 * named. */
static enum loop_class request_class(struct vffs *fs, const char *data, size_t size)
{
	const struct fuse_in_header *in = (const struct fuse_in_header *)data;
	const char *arg = data + sizeof(*in);
	enum loop_class c;

	switch (in->opcode) {
	case FUSE_WRITE: /* a commit, but for the notifier's byte (op_write answers it at once) */
		if (from_notifier_pid(fs, in->pid))
			return LOOP_INLINE;
		/* a report that joins the commit under way waits for nothing:
		 * op_write() passes it on (loop_pass_on()) if it cannot */
		if (size >= sizeof(*in) + sizeof(struct fuse_write_in) &&
		    request_handle(arg)->joins && store_commit_under_way(fs->store))
			return LOOP_INLINE;
		return LOOP_WRITER;
	case FUSE_CREATE: /* a claim's reservation */
	case FUSE_MKNOD:
	case FUSE_UNLINK: /* a claim's release */
	case FUSE_MKDIR:  /* registrations */
	case FUSE_RMDIR:
	case FUSE_FSYNC:
		return LOOP_WRITER;
	case FUSE_READ:
		if (size < sizeof(*in) + sizeof(struct fuse_read_in))
			return LOOP_READER; /* libfuse refuses it */
		c = request_handle(arg)->read_class;
		/* a placement file of an unavailable store may be repaired by the read */
		return c == LOOP_INLINE && !store_status(fs->store, NULL, 0) ? LOOP_READER : c;
	case FUSE_FLUSH: /* a claim's commit */
		if (size < sizeof(*in) + sizeof(struct fuse_flush_in))
			return LOOP_WRITER;
		return request_handle(arg)->close_class;
	case FUSE_RELEASE: /* a bare claim commits at its release */
		if (size < sizeof(*in) + sizeof(struct fuse_release_in))
			return LOOP_WRITER;
		return request_handle(arg)->close_class;
	default:
		return LOOP_INLINE;
	}
}

/* Whether a request is a writer's: an open for writing, a creation, a
 * write, and a read, flush or release of a handle opened for writing. */
static bool from_writer(const char *data, size_t size)
{
	const struct fuse_in_header *in = (const struct fuse_in_header *)data;
	const char *arg = data + sizeof(*in);
	struct fuse_open_in open_in;

	switch (in->opcode) {
	case FUSE_OPEN:
		if (size < sizeof(*in) + sizeof(open_in))
			return false;
		memcpy(&open_in, arg, sizeof(open_in));
		return (open_in.flags & O_ACCMODE) != O_RDONLY;
	case FUSE_CREATE:
	case FUSE_WRITE:
		return true;
	case FUSE_READ:
	case FUSE_FLUSH:
	case FUSE_RELEASE: /* each begins with fh (request_handle()) */
		return size >= sizeof(*in) + sizeof(uint64_t) && request_handle(arg)->writing;
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

static uid_t job_uid(const struct loop_job *job)
{
	return ((const struct fuse_in_header *)job->data)->uid;
}

/* lock held.  Unlink u (no reads queued, none served) and free it. */
static void uid_drop(struct loop *l, struct loop_uid *u)
{
	struct loop_uid **p = &l->uids;

	while (*p != u)
		p = &(*p)->next;
	*p = u->next;
	if (l->turn == u)
		l->turn = u->next;
	free(u);
}

/* lock held.  Take the head of u's queue. */
static struct loop_job *uid_pop(struct loop *l, struct loop_uid *u)
{
	struct loop_job *job = u->head;

	u->head = job->next;
	if (!u->head)
		u->tail = &u->head;
	u->bytes -= job->size;
	if (u->uid != 0)
		l->reader_bytes -= job->size;
	return job;
}

/* lock held.  The next uid whose read a worker may take now, in turn; NULL
 * when none may (the readers' share, or each uid's, is taken). */
static struct loop_uid *next_reader(struct loop *l)
{
	struct loop_uid *start, *u;

	if (l->readers >= l->reader_max || !l->uids)
		return NULL;
	start = l->turn ? l->turn : l->uids;
	u = start;
	do {
		if (u->head && u->busy < l->uid_max)
			return u;
		u = u->next ? u->next : l->uids;
	} while (u != start);
	return NULL;
}

/* lock held.  The request a worker takes: a writer's first, then a
 * reader's within the shares; NULL when there is none it may take. */
static struct loop_job *take_job(struct loop *l)
{
	struct loop_job *job = l->head;
	struct loop_uid *u;

	if (job) {
		l->head = job->next;
		if (!l->head)
			l->tail = &l->head;
		l->queued_bytes -= job->size;
		if (l->space_wanted)
			pthread_cond_signal(&l->space);
		job->reader = NULL;
		return job;
	}
	u = next_reader(l);
	if (!u)
		return NULL;
	l->turn = u->next; /* round-robin: the next uid's turn */
	job = uid_pop(l, u);
	job->reader = u;
	u->busy++;
	l->readers++;
	return job;
}

/* lock held.  A reader's request served: its share back. */
static void job_done(struct loop *l, struct loop_uid *u)
{
	if (!u)
		return;
	u->busy--;
	l->readers--;
	if (!u->head && !u->busy)
		uid_drop(l, u);
}

/* lock held.  Pick the most recently idle worker to wake: the caller
 * signals it once it has let go of the lock, so that the worker does not
 * wake only to wait for the lock (a futex round trip on every hand-off). */
static struct loop_worker *wake_idle(struct loop *l)
{
	struct loop_worker *w = l->idle;

	if (!w)
		return NULL;
	l->idle = w->next_idle;
	w->idle = false;
	w->woken = true;
	l->waking++;
	return w;
}

/* lock not held: the worker wake_idle() picked, or none. */
static void wake(struct loop_worker *w)
{
	if (w)
		(void)eventfd_write(w->wake_fd, 1);
}

/* lock held.  Lend the holder's watch of /dev/fuse to the most recently
 * idle worker while the holder serves a lone writer's request: the worker
 * stays asleep, and wakes only if a request comes meanwhile (then it takes
 * the role, lent_take()).  Costs an epoll_ctl(2) each way where passing
 * the role cost two wake-ups.  Returns whether it was lent. */
static bool lend(struct loop *l)
{
	struct loop_worker *w = l->idle;
	struct epoll_event ev = { .events = EPOLLIN };

	if (!w || l->lent || epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, fuse_session_fd(l->se), &ev) < 0)
		return false;
	l->idle = w->next_idle;
	w->idle = false;
	l->lent = w;
	return true;
}

/* lock held.  The lent watch ends: the worker goes back to the idle stack
 * (it sleeps still, or will find itself there). */
static void lend_end(struct loop *l)
{
	struct loop_worker *w = l->lent;

	(void)epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, fuse_session_fd(l->se), NULL);
	l->lent = NULL;
	w->idle = true;
	w->next_idle = l->idle;
	l->idle = w;
}

void loop_lend_end(void)
{
	struct loop_worker *w = lender;

	if (!w)
		return;
	lender = NULL;
	pthread_mutex_lock(&w->loop->lock);
	if (w->loop->lent && w->loop->holder == w)
		lend_end(w->loop);
	pthread_mutex_unlock(&w->loop->lock);
}

/* lock held.  A request came while the watch was lent to w: w takes the
 * role from the holder, which serves a writer and reads nothing. */
static void lent_take(struct loop *l, struct loop_worker *w)
{
	(void)epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, fuse_session_fd(l->se), NULL);
	l->lent = NULL;
	l->holder = w;
}

/* lock not held.  An idle worker's sleep, until its wake_fd is written or
 * (lent the watch) a request comes. */
static void idle_wait(struct loop_worker *w)
{
	struct epoll_event ev;
	eventfd_t ignored;

	if (epoll_wait(w->epoll_fd, &ev, 1, -1) < 0 && errno != EINTR)
		log_warn("a FUSE worker's wait failed: %s", strerror(errno));
	(void)eventfd_read(w->wake_fd, &ignored);
}

static void *worker_main(void *arg);

/* lock held.  Take the receiving role, and wake the next worker when what is
 * queued would otherwise wait for this one. */
static struct loop_worker *take_role(struct loop *l, struct loop_worker *w)
{
	if (w->idle) {
		/* woken by no hand-off (spuriously): off the stack, or a hand-off
		 * would pick this busy thread */
		struct loop_worker **p = &l->idle;
		while (*p != w)
			p = &(*p)->next_idle;
		*p = w->next_idle;
		w->idle = false;
	}
	l->holder = w;
	atomic_store(&w->recalled, false);
	return !l->waking && (l->head || next_reader(l)) ? wake_idle(l) : NULL;
}

/* lock held.  After serving a writer's request: when the role's holder
 * sleeps, take the role back from it, since the next request (a writer's
 * READ of its outcome, most often) follows the reply within microseconds,
 * and this thread is awake while the holder's wake-up would cost more than
 * the round trip.  The holder is told by its wake_fd (the caller writes it
 * once the lock is let go) and steps down at its next look; until then two
 * threads may read /dev/fuse, which is harmless: each serves what it read.
 * Returns the old holder, NULL when the role stays where it is. */
static struct loop_worker *reclaim(struct loop *l, struct loop_worker *w)
{
	struct loop_worker *old = l->holder;

	if (!old || l->stopping || !atomic_load(&l->holder_asleep))
		return NULL;
	atomic_store(&old->recalled, true);
	atomic_store(&l->holder_asleep, false);
	l->holder = w;
	atomic_store(&w->recalled, false);
	return old;
}

static bool receive(struct loop *l, struct loop_worker *w, struct fuse_buf *buf);

static void serve_job(struct loop *l, struct loop_job *job);

/* What every thread of the loop runs: the receiving role when nobody holds
 * it, else a request queued for it, else it waits on the idle stack. */
static void run(struct loop_worker *w)
{
	struct loop *l = w->loop;
	struct fuse_buf buf = { 0 }; /* what this thread receives into */
	bool served_writer = false;

	pthread_mutex_lock(&l->lock);
	for (;;) {
		struct loop_worker *next, *old = NULL;
		struct loop_job *job;

		lender = NULL;
		if (served_writer && l->lent && l->holder == w)
			lend_end(l); /* no request came, and its reply did not end the lend */
		if (!l->stopping &&
		    (!l->holder || l->holder == w || (served_writer && (old = reclaim(l, w))))) {
			next = old ? NULL : take_role(l, w);
			pthread_mutex_unlock(&l->lock);
			if (old)
				(void)eventfd_write(old->wake_fd, 1);
			wake(next);
			w->look = !served_writer;
			served_writer = receive(l, w, &buf);
			pthread_mutex_lock(&l->lock);
			continue;
		}
		served_writer = false;
		job = take_job(l);
		if (!job) {
			if (l->stopping)
				break; /* what is left, the workers still serving take */
			if (!w->idle) {
				w->idle = true;
				w->next_idle = l->idle;
				l->idle = w;
			}
			pthread_mutex_unlock(&l->lock);
			idle_wait(w);
			pthread_mutex_lock(&l->lock);
			if (w->woken) {
				w->woken = false;
				l->waking--;
			}
			if (l->lent == w && !l->stopping)
				lent_take(l, w);
			continue;
		}
		if (w->idle) {
			/* woken by no hand-off (spuriously): off the stack */
			struct loop_worker **p = &l->idle;
			while (*p != w)
				p = &(*p)->next_idle;
			*p = w->next_idle;
			w->idle = false;
		}
		/* Who takes the next request: a hand-off wakes a worker only
		 * while none is on its way, and a reader's request waiting for
		 * its share wakes nobody; so each worker that takes one wakes
		 * the next while there is more. */
		next = NULL;
		if (!l->waking && (l->head || next_reader(l)))
			next = wake_idle(l);
		pthread_mutex_unlock(&l->lock);
		wake(next);

		struct loop_uid *reader = job->reader;
		if (!reader)
			atomic_fetch_add_explicit(&l->writers_serving, 1, memory_order_relaxed);
		serve_job(l, job);
		if (!reader)
			atomic_fetch_sub_explicit(&l->writers_serving, 1, memory_order_relaxed);
		served_writer = !reader;
		pthread_mutex_lock(&l->lock);
		job_done(l, reader);
	}
	pthread_mutex_unlock(&l->lock);
	free(buf.mem);
}

static void *worker_main(void *arg)
{
	run(arg);
	return NULL;
}

/* Queue a copy of the request for a worker: -ENOMEM, the caller serves it;
 * -ENOBUFS, a reader's past its bound: the caller refuses it. */
static int hand_off(struct loop *l, const struct fuse_buf *buf, enum loop_class class)
{
	struct loop_job *job = malloc(sizeof(*job) + buf->size);
	struct loop_worker *spawn = NULL, *woken = NULL;
	bool takeable = true;

	if (!job)
		return -ENOMEM;
	job->next = NULL;
	job->reader = NULL;
	job->size = buf->size;
	memcpy(job->data, buf->mem, buf->size);

	pthread_mutex_lock(&l->lock);
	if (class == LOOP_WRITER) {
		while (l->queued_bytes && l->queued_bytes + job->size > LOOP_QUEUE_BYTES) {
			l->space_wanted = true;
			pthread_cond_wait(&l->space, &l->lock);
		}
		l->space_wanted = false;
		*l->tail = job;
		l->tail = &job->next;
		l->queued_bytes += job->size;
	} else {
		uid_t uid = job_uid(job);
		struct loop_uid *u = l->uids;

		while (u && u->uid != uid)
			u = u->next;
		if ((u && u->bytes && u->bytes + job->size > LOOP_UID_BYTES) ||
		    (uid != 0 && l->reader_bytes &&
		     l->reader_bytes + job->size > LOOP_QUEUE_BYTES)) {
			pthread_mutex_unlock(&l->lock);
			free(job);
			return -ENOBUFS;
		}
		if (!u) {
			u = calloc(1, sizeof(*u));
			if (!u) {
				pthread_mutex_unlock(&l->lock);
				free(job);
				return -ENOMEM;
			}
			u->uid = uid;
			u->tail = &u->head;
			u->next = l->uids;
			l->uids = u;
		}
		*u->tail = job;
		u->tail = &job->next;
		u->bytes += job->size;
		if (uid != 0)
			l->reader_bytes += job->size;
		takeable = l->readers < l->reader_max && u->busy < l->uid_max;
	}
	/* A worker woken and on its way takes this or wakes the next idle one;
	 * with none idle, one more is started. */
	if (takeable && !(l->waking && l->idle) && !(woken = wake_idle(l)) && l->started < l->max)
		spawn = &l->workers[l->started++];
	pthread_mutex_unlock(&l->lock);
	wake(woken);

	if (spawn) {
		sigset_t all, old;
		int r;

		/* Born with every signal blocked: the caller's are its own to wait for. */
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

/* A reader's request past its bound: ENOBUFS now, written as libfuse
 * writes a reply (one write(2) of the header), so that the receiving
 * thread waits for nobody. */
static void refuse(struct loop *l, const struct fuse_buf *buf)
{
	const struct fuse_in_header *in = buf->mem;
	struct fuse_out_header out = { .len = sizeof(out),
				       .error = -ENOBUFS,
				       .unique = in->unique };
	int64_t now = monotonic_ns(), last = atomic_load(&l->refused_logged);

	if (write(fuse_session_fd(l->se), &out, sizeof(out)) < 0) {
		/* the request was interrupted meanwhile: no reply is wanted */
	}
	if ((!last || now - last >= LOOP_LOG_INTERVAL_NS) &&
	    atomic_compare_exchange_strong(&l->refused_logged, &last, now)) {
		log_warn("reads queued by uid %u (or by every uid) reached their bound: "
			 "its reads get ENOBUFS until its queue drains",
			 (unsigned)in->uid);
	}
}

/* lock held.  Any queued request, whoever's, with no share counted: for the
 * role's holder with no worker, and at the end. */
static struct loop_job *take_any(struct loop *l)
{
	struct loop_job *job = take_job(l);

	if (job) {
		job_done(l, job->reader);
		return job;
	}
	for (struct loop_uid *u = l->uids; u; u = u->next)
		if (u->head) {
			job = uid_pop(l, u);
			if (!u->head && !u->busy)
				uid_drop(l, u);
			return job;
		}
	return NULL;
}

/* With no worker at all, the role's holder empties the queues itself. */
static void serve_queue_here(struct loop *l)
{
	for (;;) {
		pthread_mutex_lock(&l->lock);
		struct loop_job *job = take_any(l);
		pthread_mutex_unlock(&l->lock);
		if (!job)
			return;
		serve_job(l, job);
	}
}

/* The next request into buf, as fuse_session_receive_buf() returns it;
 * -EAGAIN when none came and w should look at its role first (a recall,
 * the stop).  Awake for a while first, reading /dev/fuse (non-blocking,
 * loop_new()) until a request is there, when the request served last was
 * a reader's (w->look): a reader's next request follows its reply within
 * microseconds, and on a virtual machine a thread woken on a vCPU that
 * went idle meanwhile costs more than the round trip itself
 * (docs/benchmarks.md: a read of VF/quarantined 70 us against 21 us).
 * Not after a writer's request (from_writer()), nor while a writer's
 * request is served or a commit is under way: each report costs a commit,
 * which the look would only take the CPU from, with the writer's client
 * and the writers whose reports join the next commit (a lone writer's
 * reports, 0.87 of the report floor with the look, 0.93 without).  Then
 * asleep in poll(2) on /dev/fuse and on w's wake_fd.  Bounded: at most
 * LOOP_SPIN_NS of CPU per request, none while no request comes. */
static int next_request(struct loop *l, struct loop_worker *w, struct fuse_buf *buf)
{
	struct pollfd pfd[2] = { { .fd = fuse_session_fd(l->se), .events = POLLIN },
				 { .fd = w->wake_fd, .events = POLLIN } };
	int64_t until = 0;
	eventfd_t ignored;
	int r;

	for (;;) {
		r = fuse_session_receive_buf(l->se, buf);
		if (r != -EAGAIN && r != -EINTR)
			return r;
		if (!w->look || atomic_load_explicit(&l->writers_serving, memory_order_relaxed) ||
		    store_commit_under_way(l->fs->store))
			break;
		int64_t now = monotonic_ns();
		if (!until)
			until = now + LOOP_SPIN_NS;
		else if (now >= until)
			break;
	}
	atomic_store(&l->holder_asleep, true);
	(void)poll(pfd, 2, -1);
	atomic_store(&l->holder_asleep, false);
	if (pfd[1].revents)
		(void)eventfd_read(w->wake_fd, &ignored);
	return -EAGAIN;
}

/* The request in buf, which an op found it cannot serve here without
 * waiting (loop_pass_on()), as a writer's: to a worker, or with none, on
 * this thread as a worker would serve it. */
static void pass_on(struct loop *l, struct fuse_buf *buf)
{
	int h = buf->flags & FUSE_BUF_IS_FD ? -ENOMEM : hand_off(l, buf, LOOP_WRITER);

	passed_on = false;
	if (h == -EAGAIN)
		serve_queue_here(l);
	if (h == 0 || h == -EAGAIN)
		return;
	receiver_thread = false;
	fuse_session_process_buf(l->se, buf);
	receiver_thread = true;
}

/* lock held.  The session is over (r: the receive's end): every thread
 * ends once what was queued is served. */
static void end_session(struct loop *l, int r)
{
	l->stopping = true;
	l->result = r < 0 ? r : 0;
	l->holder = NULL;
	l->lent = NULL;
	(void)eventfd_write(l->first.wake_fd, 1);
	for (unsigned i = 0; i < l->started; i++)
		(void)eventfd_write(l->workers[i].wake_fd, 1);
}

/* Hold the receiving role (the caller took it) until the session ends, the
 * role is taken back (reclaim()), or a writer's request comes while a
 * thread is idle: the role passes to that thread, and this one serves the
 * request, so that the next receiver's wake-up overlaps the commit instead
 * of preceding it.  Returns whether it served a writer's request. */
static bool receive(struct loop *l, struct loop_worker *w, struct fuse_buf *buf)
{
	struct fuse_session *se = l->se;
	enum loop_class class;
	int r = 0;

	receiver_thread = true;
	for (;;) {
		if (fuse_session_exited(se))
			break;
		if (atomic_load(&w->recalled)) {
			receiver_thread = false;
			return false; /* the role is another's now */
		}
		r = next_request(l, w, buf);
		if (r == -EAGAIN)
			continue;
		if (r <= 0)
			break;
		class = buf->flags & FUSE_BUF_IS_FD ? LOOP_INLINE :
						      request_class(l->fs, buf->mem, buf->size);
		/* decided before it is served: a RELEASE frees its handle */
		w->look = buf->flags & FUSE_BUF_IS_FD || !from_writer(buf->mem, buf->size);
		/* The first writer's request in a while: served here.  While
		 * others are served, they go to the workers: passing the role
		 * leaves nobody reading for a thread's wake-up, which many
		 * writers at once would pay on every request. */
		if (class == LOOP_WRITER &&
		    !atomic_load_explicit(&l->writers_serving, memory_order_relaxed)) {
			bool lent;

			pthread_mutex_lock(&l->lock);
			/* behind the writers queued before it, none passes it */
			lent = !l->head && l->holder == w && lend(l);
			pthread_mutex_unlock(&l->lock);
			if (lent) {
				receiver_thread = false;
				lender = w;
				atomic_fetch_add_explicit(&l->writers_serving, 1,
							  memory_order_relaxed);
				fuse_session_process_buf(se, buf);
				atomic_fetch_sub_explicit(&l->writers_serving, 1,
							  memory_order_relaxed);
				return true;
			}
		}
		if (class != LOOP_INLINE) {
			int h = hand_off(l, buf, class);

			if (h == 0)
				continue;
			if (h == -ENOBUFS) {
				refuse(l, buf);
				continue;
			}
			if (h == -EAGAIN) {
				serve_queue_here(l);
				continue;
			}
		}
		fuse_session_process_buf(se, buf);
		if (passed_on)
			pass_on(l, buf);
	}
	pthread_mutex_lock(&l->lock);
	end_session(l, r);
	pthread_mutex_unlock(&l->lock);
	receiver_thread = false;
	return false;
}

void loop_interrupt(struct loop *l)
{
	pthread_mutex_lock(&l->lock);
	if (l->holder)
		(void)eventfd_write(l->holder->wake_fd, 1);
	pthread_mutex_unlock(&l->lock);
}

static int worker_init(struct loop *l, struct loop_worker *w)
{
	struct epoll_event ev = { .events = EPOLLIN };

	w->loop = l;
	w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->wake_fd < 0)
		return -errno;
	w->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epoll_fd < 0 || epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, w->wake_fd, &ev) < 0)
		return -errno;
	atomic_init(&w->recalled, false);
	return 0;
}

static void worker_fini(struct loop_worker *w)
{
	if (w->epoll_fd >= 0)
		close(w->epoll_fd);
	if (w->wake_fd >= 0)
		close(w->wake_fd);
}

DEFINE_CLEANUP_FUNC(struct loop, loop_free)

int loop_new(struct vffs *fs, unsigned max_workers, struct loop **ret)
{
	_cleanup_(loop_freep) struct loop *l = calloc(1, sizeof(*l));
	int fd = fuse_session_fd(fs->se), flags, r;

	if (!l)
		return -ENOMEM;
	l->first.wake_fd = l->first.epoll_fd = -1;
	l->fs = fs;
	l->se = fs->se;
	l->max = max_workers ? max_workers : 1;
	l->workers = calloc(l->max, sizeof(*l->workers));
	if (!l->workers)
		return -ENOMEM;
	for (unsigned i = 0; i < l->max; i++)
		l->workers[i].wake_fd = l->workers[i].epoll_fd = -1;
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->space, NULL);
	l->tail = &l->head;
	l->reader_max = MAX(l->max / 2, 1u);
	l->uid_max = MAX(l->max / 4, 1u);
	atomic_init(&l->writers_serving, 0);
	atomic_init(&l->holder_asleep, false);
	atomic_init(&l->refused_logged, 0);
	if ((r = worker_init(l, &l->first)) < 0)
		return r;
	for (unsigned i = 0; i < l->max; i++)
		if ((r = worker_init(l, &l->workers[i])) < 0)
			return r;
	/* a thread that finds no request waits in poll(2), with its wake_fd */
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	*ret = move_ptr(l);
	return 0;
}

int loop_run(struct loop *l)
{
	run(&l->first);
	for (unsigned i = 0; i < l->started; i++)
		if (l->workers[i].started)
			pthread_join(l->workers[i].thread, NULL);
	serve_queue_here(l); /* what no worker could take (none started) */
	return l->result;
}

void loop_free(struct loop *l)
{
	if (!l)
		return;
	worker_fini(&l->first);
	for (unsigned i = 0; l->workers && i < l->max; i++)
		worker_fini(&l->workers[i]);
	pthread_cond_destroy(&l->space);
	pthread_mutex_destroy(&l->lock);
	free(l->workers);
	free(l);
}
