/* SPDX-License-Identifier: MIT */
/*
 * handle.c - open files and the read path: the list of open files and
 * directories, handles, open, read, write, flush, release, poll, and what
 * a handle is charged.
 *
 * A read at offset 0 renders the file afresh (sysfs style) into the
 * handle's snapshot; later offsets are served from that snapshot, so one
 * `cat` is consistent.  The handle mutex serializes reads and writes on one
 * open file, so one `cat` sees one snapshot and a write's outcome is read
 * back by the same handle.  What a handle keeps (itself, its snapshot; a
 * directory handle's listing) is charged to the uid that opened it,
 * whoever reads through it (budget.h): past the budget, that open or read
 * gets ENOBUFS.  Each open keeps its own snapshot: the budget bounds them,
 * and a rendered text is at most a VF's failures (about 1 MB).
 */
#include "fs/vffs-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Charge uid for what an open file keeps (budget.h); a spent budget is
 * logged at most once per BUDGET_LOG_INTERVAL_S. */
int charge(struct vffs *fs, uid_t uid, size_t bytes)
{
	bool uid_spent;
	int r = budget_charge(fs->budget, uid, bytes, &uid_spent);

	if (r == -ENOBUFS && budget_log_due(fs->budget, uid_spent, monotonic_ns())) {
		if (uid_spent)
			log_warn("reader budget of uid %u spent: its open files hold %zu of %d "
				 "bytes; its opens and reads get ENOBUFS until it closes some",
				 (unsigned)uid, budget_held(fs->budget, uid),
				 READER_BUDGET_PER_UID);
		else
			log_warn("reader budget of all users spent: open files of users other "
				 "than root hold %zu of %d bytes; opens and reads by uid %u and "
				 "other non-root users get ENOBUFS until some are closed",
				 budget_total(fs->budget), READER_BUDGET_TOTAL, (unsigned)uid);
	}
	return r;
}

void open_link_add(struct vffs *fs, struct open_link *l,
		   void (*free_fn)(struct vffs *, struct open_link *))
{
	l->free = free_fn;
	pthread_mutex_lock(&fs->open_lock);
	l->prev = NULL;
	l->next = fs->open_list;
	if (l->next)
		l->next->prev = l;
	fs->open_list = l;
	pthread_mutex_unlock(&fs->open_lock);
}

void open_link_remove(struct vffs *fs, struct open_link *l)
{
	pthread_mutex_lock(&fs->open_lock);
	if (l->prev)
		l->prev->next = l->next;
	else if (fs->open_list == l)
		fs->open_list = l->next;
	if (l->next)
		l->next->prev = l->prev;
	l->prev = l->next = NULL;
	pthread_mutex_unlock(&fs->open_lock);
}

/* Copy buf[off, off + size) clipped to len into a fresh allocation, so the
 * caller can reply after unlocking: a release may free buf as soon as the
 * kernel has the reply.  *ret is NULL and *ret_len 0 past the end. */
int copy_window(const char *buf, size_t len, off_t off, size_t size, char **ret, size_t *ret_len)
{
	*ret = NULL;
	*ret_len = 0;
	if (off < 0 || (size_t)off >= len)
		return 0;
	*ret_len = MIN(len - (size_t)off, size);
	*ret = malloc(*ret_len);
	if (!*ret)
		return -ENOMEM;
	memcpy(*ret, buf + off, *ret_len);
	return 0;
}

void reply_read(fuse_req_t req, int r, const char *reply, size_t len)
{
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_buf(req, reply, len);
}

void handle_free(struct vffs *fs, struct vhandle *h)
{
	if (!h)
		return;
	open_link_remove(fs, &h->link);
	if (h->kind == VN_CLAIM)
		claim_handle_free(&h->claim);
	if (h->watched)
		notifier_watch_remove(fs->notifier, &h->watch);
	budget_release(fs->budget, h->open_uid, h->snapshot_len);
	budget_release(fs->budget, h->open_uid, h->open_charge);
	pthread_mutex_destroy(&h->lock);
	pthread_mutex_destroy(&h->outcome_lock);
	free(h->snapshot);
	free(h);
}

static void handle_free_link(struct vffs *fs, struct open_link *l)
{
	handle_free(fs, (struct vhandle *)l);
}

struct vhandle *handle_new(struct vffs *fs, const struct vnode *n, bool created,
			   const struct fuse_ctx *ctx)
{
	struct vhandle *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	pthread_mutex_init(&h->lock, NULL);
	pthread_mutex_init(&h->outcome_lock, NULL);
	open_link_add(fs, &h->link, handle_free_link);
	h->kind = n->kind;
	h->index = n->index;
	h->read_class = LOOP_READER; /* op_open() tells those that never wait */
	h->writing = created;
	/* a created claim commits at its close; op_open() tells those written */
	h->close_class = n->kind == VN_CLAIM && created ? LOOP_WRITER : LOOP_INLINE;
	if (n->kind == VN_CLAIM) {
		snprintf(h->vf, sizeof(h->vf), "%s", n->claim.a.vf);
		claim_handle_init(&h->claim, &n->claim, n->vf.id, created, ctx->uid, ctx->pid);
	} else if (n->kind == VN_VF_ENTRY) {
		snprintf(h->vf, sizeof(h->vf), "%s", n->vf.vf);
		h->vf_id = n->vf.id;
	} else if (n->kind == VN_GPU_ENTRY) {
		memcpy(h->vf, n->gpu, sizeof(h->vf));
	}
	if (vnode_key(n, &h->watch.key)) {
		const struct vfile *f = vfile_of(n->kind, n->index);
		if (f && (f->flags & VFILE_NOTIFY) &&
		    notifier_watch_add(fs->notifier, &h->watch) == 0)
			h->watched = true;
	}
	return h;
}

void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct vffs *fs = req_fs(req);
	struct vnode n;
	const struct vfile *f = NULL;
	struct vhandle *h;
	bool writing = (fi->flags & O_ACCMODE) != O_RDONLY;
	uid_t uid = fuse_req_ctx(req)->uid;
	size_t open_charge;
	int r;

	if (!vnode_get_or_reply(req, ino, &n))
		return;
	f = vfile_of(n.kind, n.index);
	if (n.kind == VN_ROOT || n.kind == VN_VF_DIR || n.kind == VN_GPU_DIR ||
	    (f && (f->flags & VFILE_DIR))) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	/* Like sysfs: even root cannot open a read-only attribute for writing;
	 * only the notifier's ignored one-byte writes get through. */
	if (writing && f && !f->write && !from_notifier(fs, req)) {
		fuse_reply_err(req, EACCES);
		return;
	}
	/* What the handle itself keeps is charged too, so that opens that never
	 * read are bounded as well; the notifier's opens are not (budget.h). */
	open_charge = from_notifier(fs, req) ? 0 : sizeof(*h);
	/* a claim open for writing may stage up to a whole claim (claims.h) */
	if (open_charge && n.kind == VN_CLAIM && writing)
		open_charge += ASSIGNMENT_FILE_MAX;
	r = charge(fs, uid, open_charge);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	h = handle_new(fs, &n, false, fuse_req_ctx(req));
	if (!h) {
		budget_release(fs->budget, uid, open_charge);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	h->open_uid = uid;
	h->open_charge = open_charge;
	h->append = (fi->flags & O_APPEND) != 0;
	/* A fixed-size file opened for reading only is served from the page
	 * cache, kept across opens, which the notifier invalidates (the
	 * ordering rule, docs/architecture.md).  Everything else reads
	 * through to us: writers, the report outcome, claims, and files whose
	 * length varies (they would tear).  While the store is unavailable
	 * nothing is opened cached, and the open drops the cached pages (no
	 * keep_cache): the read reaches us and fails closed. */
	h->cached = !writing && f && vfile_page_cached(f) && !from_notifier(fs, req) &&
		    store_status(fs->store, NULL, 0);
	/* Claims and placement files render from memory, an outcome is a copy
	 * (loop.c) */
	if ((!writing && (n.kind == VN_CLAIM || (f && (f->flags & VFILE_PLACEMENT)))) ||
	    (f && (f->flags & VFILE_OUTCOME)))
		h->read_class = LOOP_INLINE;
	h->joins = writing && f && f->submit;
	h->writing = writing;
	if (n.kind == VN_CLAIM && writing)
		h->close_class = LOOP_WRITER; /* its FLUSH and RELEASE commit (claims.h) */
	fi->fh = (uintptr_t)h;
	fi->direct_io = !h->cached;
	/* Only a claim opened for writing acts on close (claims.h): no other
	 * close costs a FLUSH round trip. */
	fi->noflush = !(n.kind == VN_CLAIM && writing);
	fi->keep_cache = h->cached;
	if (fuse_reply_open(req, fi) < 0)
		handle_free(fs, h); /* interrupted: no release will come */
}

/* Whether the requester may write the writable files (what
 * default_permissions grants on 0664 root:group files): uid 0, or the
 * writers' group as its group or a supplementary one (read from /proc). */
static bool requester_may_write(struct vffs *fs, fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t groups[64];
	int n;

	if (ctx->uid == 0 || ctx->gid == fs->group)
		return true;
	n = fuse_req_getgroups(req, (int)ARRAY_SIZE(groups), groups);
	for (int i = 0; i < n && i < (int)ARRAY_SIZE(groups); i++)
		if (groups[i] == fs->group)
			return true;
	return false; /* also when there are more groups than we look at: fail closed */
}

/* The one place that decides whether a read may repair the store: a read
 * at offset 0 of a placement-facing file (VFILE_PLACEMENT) by a requester
 * who may write renders with STORE_READ_RETRY (an unavailable store is
 * retried: store_retry_for_read, at most once a second for the whole
 * store); every other render reads STORE_READ_NORETRY (vfiles.h), so no
 * other read, whoever makes it, ever repairs
 * (tests/adversarial/repair-rights.sh).  Never on the FUSE loop's
 * receiving thread, which must not wait on a repair (loop.c hands such a
 * read to a worker; one that finds the store latched only on the way
 * fails closed). */
static enum store_read read_may_repair(struct vffs *fs, fuse_req_t req, const struct vhandle *h)
{
	const struct vfile *f = vfile_of(h->kind, h->index);

	if (f && (f->flags & VFILE_PLACEMENT) && fs->store && !loop_on_receiver() &&
	    !store_status(fs->store, NULL, 0) && requester_may_write(fs, req))
		return STORE_READ_RETRY;
	return STORE_READ_NORETRY;
}

/* The call a read or a write through h makes: the mount's parts and h's
 * file; the caller adds what its direction needs. */
static struct vfile_call handle_call(const struct vffs *fs, const struct vhandle *h)
{
	return (struct vfile_call){
		.store = fs->store,
		.metrics = fs->metrics,
		.recovery = fs->recovery,
		.sysfs_root = fs->sysfs_root,
		.vf = h->vf,
		.vf_id = h->vf_id,
	};
}

/* Render the handle's file into its snapshot, charged to the uid that
 * opened the handle, whoever reads through it (budget.h): a descriptor
 * passed to another process keeps costing its opener. */
static int handle_render(struct vffs *fs, struct vhandle *h, enum store_read read)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	FILE *out;
	int r = 0;
	struct vfile_call call = handle_call(fs, h);

	call.read = read;

	if (h->watched)
		notifier_seen(fs->notifier, &h->watch); /* before reading the state */
	out = open_memstream(&buf, &len);
	if (!out)
		return -ENOMEM;
	switch (h->kind) {
	case VN_TOP:
		r = top_files[h->index].render(&call, out);
		break;
	case VN_VF_ENTRY:
	case VN_GPU_ENTRY: {
		const struct vfile *f = vfile_of(h->kind, h->index);
		if (f->render) /* none for VFILE_OUTCOME: read_outcome() */
			r = f->render(&call, out);
		break;
	}
	case VN_CLAIM:
		r = claims_render(&fs->claims, &h->claim, out);
		break;
	default:
		r = -EISDIR;
	}
	if (fclose(out) != 0 && r == 0)
		r = -ENOMEM;
	if (r == 0)
		r = charge(fs, h->open_uid, len);
	if (r < 0)
		return r;
	budget_release(fs->budget, h->open_uid, h->snapshot_len);
	free(h->snapshot);
	h->snapshot = move_ptr(buf);
	h->snapshot_len = len;
	h->rendered = true;
	return 0;
}

/* A VFILE_OUTCOME file's read: the outcome of the handle's last write, as
 * it was when the reads began at offset 0.  Under outcome_lock alone, so a
 * read never waits for a write's commit through the same handle and the
 * receiving thread serves it (loop.c). */
static void read_outcome(fuse_req_t req, struct vhandle *h, size_t size, off_t off)
{
	_cleanup_free_ char *reply = NULL;
	size_t len = 0;
	int r;

	pthread_mutex_lock(&h->outcome_lock);
	if (off == 0) {
		int n = snprintf(h->outcome_shown, sizeof(h->outcome_shown), "%s%s", h->outcome,
				 h->outcome[0] ? "\n" : "");
		h->outcome_shown_len = n > 0 ? (size_t)n : 0;
	}
	r = copy_window(h->outcome_shown, h->outcome_shown_len, off, size, &reply, &len);
	pthread_mutex_unlock(&h->outcome_lock);
	reply_read(req, r, reply, len);
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct vffs *fs = req_fs(req);
	struct vhandle *h = (struct vhandle *)(uintptr_t)fi->fh;
	const struct vfile *f = vfile_of(h->kind, h->index);
	_cleanup_free_ char *reply = NULL;
	size_t len = 0;
	int r = 0;

	if (f && (f->flags & VFILE_OUTCOME)) {
		read_outcome(req, h, size, off);
		return;
	}
	pthread_mutex_lock(&h->lock);
	if (h->kind == VN_CLAIM) {
		/* the outcome or the claim, afresh also from where the writes
		 * through this open file left the offset (claims.h) */
		int64_t at = claims_read_offset(&h->claim, (uint64_t)off);

		if (at < 0 || h->claim.outcome[0]) {
			reply = malloc(MIN(size, (size_t)CLAIM_OUTCOME_MAX) + 1);
			r = !reply ? -ENOMEM :
			    at < 0 ? 0 :
				     claims_read_outcome(&h->claim, (uint64_t)at,
							 MIN(size, (size_t)CLAIM_OUTCOME_MAX),
							 reply, &len);
			pthread_mutex_unlock(&h->lock);
			reply_read(req, r, reply, len);
			return;
		}
		off = (off_t)at;
	}
	if (off == 0 || !h->rendered) {
		r = handle_render(fs, h, read_may_repair(fs, req, h));
	}
	if (r == 0)
		r = copy_window(h->snapshot, h->snapshot_len, off, size, &reply, &len);
	pthread_mutex_unlock(&h->lock);
	reply_read(req, r, reply, len);
}

/* The path of h's file under the mountpoint, for the log. */
static const char *handle_path(const struct vhandle *h, char *buf, size_t size)
{
	switch (h->kind) {
	case VN_TOP:
		return top_files[h->index].name;
	case VN_VF_ENTRY:
		snprintf(buf, size, "%s/%s", h->vf, vf_files[h->index].name);
		return buf;
	case VN_CLAIM:
		snprintf(buf, size, "%s/assignments/%s", h->vf, h->claim.instance_id);
		return buf;
	case VN_GPU_ENTRY:
		snprintf(buf, size, "gpus/%s/%s", h->vf, gpu_files[h->index].name);
		return buf;
	default:
		return "?";
	}
}

/* What a read of a VFILE_OUTCOME handle shows from now on (read_outcome()). */
static void publish_outcome(struct vhandle *h, const char *outcome)
{
	const struct vfile *f = vfile_of(h->kind, h->index);

	if (!f || !(f->flags & VFILE_OUTCOME))
		return;
	pthread_mutex_lock(&h->outcome_lock);
	snprintf(h->outcome, sizeof(h->outcome), "%s", outcome);
	pthread_mutex_unlock(&h->outcome_lock);
}

/* A write's end, whoever answers it (op_write(), deferred_answer()): the
 * outcome published, the log line, the reply. */
static void write_answer(struct vffs *fs, fuse_req_t req, struct vhandle *h, size_t size,
			 const char *command, int r, const char *outcome, const char *why,
			 bool unchanged)
{
	char path[VF_ADDR_BUFSZ + INSTANCE_ID_MAX + 32];

	/* Published before the reply; a refused write, for whatever reason,
	 * leaves none, so no reader takes an earlier write's for its answer. */
	publish_outcome(h, r == 0 ? outcome : "");
	if (r < 0 && why)
		log_refused(req, "write to", handle_path(h, path, sizeof(path)), why);
	/* the operator's files at notice; reports (VFILE_OUTCOME) and claims at info */
	if (r == 0 && !unchanged)
		log_accepted(req,
			     (h->kind == VN_VF_ENTRY &&
			      (vf_files[h->index].flags & VFILE_OUTCOME)) ? /* reports */
				     LOG_INFO :
				     LOG_NOTICE,
			     "write to", handle_path(h, path, sizeof(path)), command);
	/* An accepted write is answered through the notifier (the ordering
	 * rule, docs/architecture.md; tests/fs/test-freshness.sh).  Every
	 * accepted write goes that way, so that no shortcut can skip the rule. */
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		notifier_reply_write(fs->notifier, req, size);
}

/* A write queued behind the commit under way (vfile_deferred): what its
 * answer needs, until the store's answerer answers it. */
struct deferred_write {
	struct vfile_deferred d;
	struct vffs *fs;
	fuse_req_t req;
	struct vhandle *h; /* the kernel releases it only after the reply */
	size_t size;
	char command[]; /* as written, for the log line */
};

static void deferred_answer(struct vfile_deferred *d, int r)
{
	struct deferred_write *w = container_of(d, struct deferred_write, d);
	struct vffs *fs = w->fs;

	write_answer(fs, w->req, w->h, w->size, w->command, r, d->outcome, d->why, d->unchanged);
	free(w);
	/* vffs_stop() waits for the last one; fs may go once this is done */
	futex_post(&fs->writes_answered);
	futex_post_wake(&fs->writes_answered);
}

void handle_wait_deferred(struct vffs *fs)
{
	unsigned seen;

	while ((seen = atomic_load(&fs->writes_answered.word)) != atomic_load(&fs->writes_deferred))
		futex_sleep(&fs->writes_answered, seen);
	futex_leave(&fs->writes_answered);
}

/* Queue the command behind the commit under way, when f does that and one
 * is: 0 answered later (deferred_answer), -EAGAIN write it here, else
 * refused (*why). */
static int write_deferred(struct vffs *fs, fuse_req_t req, struct vhandle *h, const struct vfile *f,
			  const char *command, size_t size, const char **why)
{
	if (!f->submit || !store_commit_under_way(fs->store))
		return -EAGAIN;
	struct deferred_write *w = malloc(sizeof(*w) + size + 1);
	if (!w)
		return -EAGAIN;
	*w = (struct deferred_write){ .fs = fs, .req = req, .h = h, .size = size };
	memcpy(w->command, command, size + 1);
	w->d.call = handle_call(fs, h);
	w->d.call.outcome = w->d.outcome;
	w->d.call.why = &w->d.why;
	w->d.call.uid = fuse_req_ctx(req)->uid;
	w->d.call.pid = fuse_req_ctx(req)->pid;
	w->d.call.unchanged = &w->d.unchanged;
	w->d.answer = deferred_answer;
	atomic_fetch_add(&fs->writes_deferred, 1);
	int r = f->submit(&w->d, w->command);
	if (r == 0)
		return 0; /* w is the answer's: it may be gone already */
	*why = w->d.why;
	free(w);
	atomic_fetch_sub(&fs->writes_deferred, 1);
	return r;
}

void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
	      struct fuse_file_info *fi)
{
	struct vffs *fs = req_fs(req);
	struct vhandle *h = (struct vhandle *)(uintptr_t)fi->fh;
	_cleanup_free_ char *command = NULL;
	const char *why = NULL;
	char path[VF_ADDR_BUFSZ + INSTANCE_ID_MAX + 32], outcome[VFILE_OUTCOME_MAX] = "";
	size_t len = size;
	bool unchanged = false;
	int r = -EINVAL;

	if (from_notifier(fs, req)) {
		/* The notifier's byte: it only makes the kernel emit inotify events. */
		fuse_reply_write(req, size);
		return;
	}
	if (h->kind == VN_CLAIM) {
		/* staged whole (claims.h): committed at FLUSH, logged there */
		pthread_mutex_lock(&h->lock);
		r = claims_write(&fs->claims, &h->claim, buf, size, (uint64_t)off, h->append,
				 fuse_req_ctx(req)->uid, fuse_req_ctx(req)->pid, &why);
		pthread_mutex_unlock(&h->lock);
		if (r < 0 && why)
			log_refused(req, "write to", handle_path(h, path, sizeof(path)), why);
		if (r < 0)
			fuse_reply_err(req, -r);
		else
			notifier_reply_write(fs->notifier, req, size);
		return;
	}
	/* One write(2) at offset 0 is one whole command.  `echo X >> file`
	 * (O_APPEND) cannot choose its offset: there every write is one. */
	if ((off != 0 && !h->append) || size == 0 || size > VFILE_COMMAND_MAX ||
	    memchr(buf, '\0', size)) {
		why = size > VFILE_COMMAND_MAX ?
			      "a command is at most " PARSE_STR(VFILE_COMMAND_MAX) " bytes" :
		      size == 0 || memchr(buf, '\0', size) ?
			      "a command is text without NUL bytes" :
			      "a command is one write(2) at offset 0";
		r = -EINVAL;
		goto out;
	}
	command = malloc(size + 1);
	if (!command) {
		r = -ENOMEM;
		goto out;
	}
	memcpy(command, buf, size);
	command[size] = '\0';
	strip_trailing_newline(command, &len);

	bool file = h->kind == VN_TOP || h->kind == VN_VF_ENTRY || h->kind == VN_GPU_ENTRY;
	const struct vfile *f = file ? vfile_of(h->kind, h->index) : NULL;

	/* On the receiving thread (a report while a commit is under way,
	 * loop.c) nothing may wait: a write that cannot join the commit, or
	 * whose handle another write holds, goes to a worker after all. */
	if (loop_on_receiver()) {
		r = f && f->write && pthread_mutex_trylock(&h->lock) == 0 ? 0 : -EAGAIN;
		if (r == 0) {
			r = write_deferred(fs, req, h, f, command, size, &why);
			pthread_mutex_unlock(&h->lock);
		}
		if (r == 0)
			return; /* answered by the commit's thread */
		if (r == -EAGAIN) {
			loop_pass_on(req);
			return;
		}
		goto out;
	}
	pthread_mutex_lock(&h->lock);
	if (f && f->write && (r = write_deferred(fs, req, h, f, command, size, &why)) == 0) {
		pthread_mutex_unlock(&h->lock);
		return; /* answered by the commit's thread */
	}
	if (r == -EAGAIN || !f || !f->write) {
		struct vfile_call call = handle_call(fs, h);

		call.outcome = outcome;
		call.why = &why;
		call.uid = fuse_req_ctx(req)->uid;
		call.pid = fuse_req_ctx(req)->pid;
		call.unchanged = &unchanged;
		r = !file ? -EISDIR : f && f->write ? f->write(&call, command) : -EACCES;
	}
	pthread_mutex_unlock(&h->lock);
out:
	loop_lend_end(); /* the receiving role back before the reply (loop.c) */
	write_answer(fs, req, h, size, command, r, outcome, why, unchanged);
}

/* Every close(2) of a descriptor: a claim commits what was written through
 * it, and close(2) returns the refusal (claims.h). */
void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct vhandle *h = (struct vhandle *)(uintptr_t)fi->fh;
	int r = 0;

	if (h->kind == VN_CLAIM) {
		pthread_mutex_lock(&h->lock);
		r = claims_flush(&req_fs(req)->claims, &h->claim);
		pthread_mutex_unlock(&h->lock);
	}
	fuse_reply_err(req, -r);
}

void op_release_file(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct vhandle *h = (struct vhandle *)(uintptr_t)fi->fh;

	/* A bare claim (created, closed without a write) commits here, not at
	 * FLUSH, which a shell's redirection sends before it writes. */
	if (h->kind == VN_CLAIM)
		claims_release(&req_fs(req)->claims, &h->claim);
	handle_free(req_fs(req), h);
	fuse_reply_err(req, 0);
}

void op_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct fuse_pollhandle *ph)
{
	struct vffs *fs = req_fs(req);
	struct vhandle *h = (struct vhandle *)(uintptr_t)fi->fh;

	if (!h->watched) {
		/* Never changes on its own (report, assignments, metrics): always readable. */
		if (ph)
			fuse_pollhandle_destroy(ph);
		fuse_reply_poll(req, POLLIN | POLLRDNORM);
		return;
	}
	/* A page-cached handle's re-read may never reach us: report once. */
	fuse_reply_poll(req, notifier_poll(fs->notifier, &h->watch, ph, h->cached));
}
