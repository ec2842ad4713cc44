/* SPDX-License-Identifier: MIT */
/*
 * vffs-internal.h - what the files of the filesystem share (vffs.h is the
 * public side): struct vffs, the vnodes and handles, and the functions one
 * file of fs/ offers the others.  One file per mechanism:
 *   vffs.c     the lowlevel ops table, lookup, attributes, the claim
 *              entries (create, mknod, unlink), mkdir/rmdir, the life cycle
 *   inode.c    inode numbers, resolving them to vnodes, attributes, entries
 *   listing.c  directory handles and listings (opendir .. releasedir)
 *   handle.c   open files: handles, the read path, write, flush, release,
 *              poll, and what they are charged (budget.h)
 *   audit.c    the log lines of refused and accepted writes
 *   mount.c    mounting: the mountpoint, a stale mount, the capability
 */
#ifndef VFHEALTH_FS_VFFS_INTERNAL_H
#define VFHEALTH_FS_VFFS_INTERNAL_H

#include "fs/vffs.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include <fuse_lowlevel.h>

#include "fs/budget.h"
#include "fs/claims.h"
#include "fs/notify.h"
#include "fs/physfn.h"
#include "store/store.h"
#include "fs/vfiles.h"
#include "grammar/assignment.h"
#include "grammar/message.h"
#include "common/cleanup.h"
#include "common/futex.h"
#include "common/log.h"
#include "common/path.h"
#include "common/parse.h"
#include "common/procfs.h"
#include "common/endpoint.h"
#include "common/sockdir.h"

#define INO_ROOT 1
#define INO_TOP_BASE 16
#define INO_KIND_SHIFT 60
#define INO_KIND_VF 1ULL
#define INO_KIND_CLAIM 2ULL
#define INO_KIND_GPU 3ULL /* 3<<60 | packed address<<8 | slot (fs/gpus.h) */
#define INO_ID_MASK ((1ULL << INO_KIND_SHIFT) - 1)
#define INO_CLAIM_ID_BITS 36 /* 2<<60 | vf id<<36 | claim id */
#define INO_CLAIM_VF_BITS (INO_KIND_SHIFT - INO_CLAIM_ID_BITS)
#define VF_SLOT_DIR 0
#define GENERATION 1
#define ENTRY_TIMEOUT_S 1.0
/* Attributes change only with content (mtime, watch.c) and are
 * invalidated with it (the ordering rule, docs/architecture.md). */
#define ATTR_TIMEOUT_S 86400.0
/* Regular files report size 0, as procfs does: their size is not known before
 * they are rendered, and a nonzero guess makes tail, wc -c and editors trust
 * it (direct_io reads are not bound by it). */
#define FILE_SIZE 0
#define FILE_BLOCK_SIZE 4096

/* The link every open file and directory has in vffs.open_list. */
struct open_link {
	struct open_link *prev, *next;
	void (*free)(struct vffs *fs, struct open_link *link); /* frees the owner */
};

struct loop;

struct vffs {
	char *mountpoint;
	gid_t group;
	struct metrics *metrics; /* the caller's; passed to the `metrics` renderer */
	struct fuse_args args;
	struct fuse_session *se;
	unsigned max_workers; /* FUSE worker threads at most */
	bool mounted;
	struct store *store; /* the caller's, from vffs_start to vffs_stop */
	struct notifier *notifier;
	struct budget *budget; /* what open files hold (budget.h) */
	/* Every open file and directory, so that those the kernel never
	 * released (the mount went away with them open) are freed at the end.
	 * open_lock: row 11 of the lock table. */
	pthread_mutex_t open_lock;
	struct open_link *open_list;
	struct timespec start_time;

	struct loop *loop; /* loop.c; from vffs_start to vffs_stop */
	pthread_t loop_thread;
	bool loop_running;
	atomic_bool stopping;
	atomic_bool unmounted_outside; /* the session ended without vffs_stop() */
	/* writes queued behind a commit, and those of them answered (handle.c) */
	atomic_uint writes_deferred;
	struct futex_word writes_answered;

	struct sockdirs socket_dirs; /* where claims' socket paths may point */
	struct claims claims;        /* the assignment files (claims.h) */
	char *sysfs_root;            /* where physfn links are read (physfn.h) */
	struct recovery *recovery;   /* the caller's (vffs_options); may be NULL */
};

enum vnode_kind {
	VN_ROOT,
	VN_TOP,
	VN_VF_DIR,
	VN_VF_ENTRY,
	VN_CLAIM,
	VN_GPU_DIR,
	VN_GPU_ENTRY
};

/* What an inode number names, resolved against the store. */
struct vnode {
	enum vnode_kind kind;
	int index;                /* VN_TOP, VN_VF_ENTRY, VN_GPU_ENTRY */
	struct store_vf_info vf;  /* VN_VF_DIR, VN_VF_ENTRY; VN_CLAIM: only its id */
	char gpu[VF_ADDR_BUFSZ];  /* VN_GPU_DIR, VN_GPU_ENTRY: the GPU's address */
	struct store_claim claim; /* VN_CLAIM */
};

/* How the FUSE loop serves a request (loop.c, request_class()): on its
 * receiving thread, or handed to a worker as a reader's (queued per uid,
 * a share of the workers) or a writer's (taken first). */
enum loop_class {
	LOOP_INLINE, /* never waits: the receiving thread */
	LOOP_READER, /* a read rendered off the receiving thread */
	LOOP_WRITER  /* commits, or waits on a commit */
};

/* One open file. */
struct vhandle {
	struct open_link link; /* first: the owner is the link's address */
	pthread_mutex_t lock;
	enum vnode_kind kind;
	int index;
	char vf[VF_ADDR_BUFSZ];
	uint64_t vf_id;
	struct claim_handle claim; /* VN_CLAIM (claims.h) */
	char *snapshot;
	size_t snapshot_len;
	uid_t open_uid; /* who opened it: charged open_charge and snapshot_len (budget.h) */
	size_t open_charge;
	bool rendered;
	bool append; /* opened O_APPEND: the kernel picks the offset */
	bool cached; /* opened keep_cache: reads may be served by the page cache */
	/* How the FUSE loop serves its READs, and its FLUSH and RELEASE (loop.c),
	 * decided where the handle is made: reads LOOP_INLINE when they never
	 * wait on a commit (opened read-only on a file rendered from memory, or
	 * a VFILE_OUTCOME file, whose reads take outcome_lock only), else
	 * LOOP_READER; close LOOP_WRITER for a claim created or opened for
	 * writing (it commits), else LOOP_INLINE (a read-only claim's close
	 * does nothing: an unprivileged user sends no writer's request). */
	enum loop_class read_class;
	enum loop_class close_class;
	/* Its writes may join the commit under way (vfile.submit): while one
	 * is, the receiving thread serves them (loop.c, op_write()). */
	bool joins;
	/* Opened for writing, or created: its requests are a writer's, after
	 * which the receiving thread does not look for the next one awake
	 * (loop.c, next_request()). */
	bool writing;
	/* VFILE_OUTCOME: the outcome of the last write through the handle, and
	 * what the reads begun at offset 0 show.  outcome_lock (a leaf) guards
	 * them and is never held across a commit, unlike `lock`. */
	pthread_mutex_t outcome_lock;
	char outcome[VFILE_OUTCOME_MAX];
	char outcome_shown[VFILE_OUTCOME_MAX + 1];
	size_t outcome_shown_len;
	bool watched;
	struct notify_watch watch;
};

/* One open directory: the listing rendered by the readdir at offset 0. */
struct dirhandle {
	struct open_link link; /* first: the owner is the link's address */
	pthread_mutex_t lock;
	char *buf;
	size_t size;
	bool plus;      /* buf holds readdirplus entries */
	uid_t open_uid; /* who opened it: charged sizeof(struct dirhandle) and size (budget.h) */
};

static inline struct vffs *req_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static inline bool from_notifier_pid(struct vffs *fs, pid_t pid)
{
	pid_t writer = notifier_writer_pid(fs->notifier);

	return writer > 0 && pid == writer;
}

static inline bool from_notifier(struct vffs *fs, fuse_req_t req)
{
	return from_notifier_pid(fs, fuse_req_ctx(req)->pid);
}

/* handle.c */
int charge(struct vffs *fs, uid_t uid, size_t bytes);
void open_link_add(struct vffs *fs, struct open_link *l,
		   void (*free_fn)(struct vffs *, struct open_link *));
void open_link_remove(struct vffs *fs, struct open_link *l);
int copy_window(const char *buf, size_t len, off_t off, size_t size, char **ret, size_t *ret_len);
/* Answer a read: the error -r when r < 0, else the len bytes at reply. */
void reply_read(fuse_req_t req, int r, const char *reply, size_t len);
void handle_free(struct vffs *fs, struct vhandle *h);
/* Wait until every write queued behind a commit was answered (vffs_stop). */
void handle_wait_deferred(struct vffs *fs);
struct vhandle *handle_new(struct vffs *fs, const struct vnode *n, bool created,
			   const struct fuse_ctx *ctx);
void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
	      struct fuse_file_info *fi);
void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_release_file(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct fuse_pollhandle *ph);

/* inode.c */
fuse_ino_t ino_vf(uint64_t id, int slot);
fuse_ino_t ino_claim(uint64_t vf_id, uint64_t id);
/* 0 for no GPU address */
fuse_ino_t ino_gpu(const char *gpu, int slot);
int lookup_gpu(struct vffs *fs, const char *gpu);
int vnode_resolve(struct vffs *fs, fuse_ino_t ino, struct vnode *n);
bool vnode_is_claim_dir(const struct vnode *n);
bool vnode_key(const struct vnode *n, struct notify_key *key);
const struct vfile *vfile_of(enum vnode_kind kind, int index);
void vnode_stat(struct vffs *fs, fuse_ino_t ino, const struct vnode *n, struct stat *st);
double attr_timeout(const struct vnode *n);
void fill_entry(struct vffs *fs, fuse_ino_t ino, const struct vnode *n, struct fuse_entry_param *e);
void reply_entry(fuse_req_t req, fuse_ino_t ino, const struct vnode *n);
int lookup_vf(struct vffs *fs, const char *vf, struct store_vf_info *ret);
int lookup_claim(struct vffs *fs, const char *vf, const char *instance_id, struct store_claim *ret);
bool vnode_get_or_reply(fuse_req_t req, fuse_ino_t ino, struct vnode *n);
bool vnode_read_only(const struct vnode *n);

/* listing.c */
void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi);
void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);

/* audit.c */
void log_refused(fuse_req_t req, const char *what, const char *file, const char *why);
void log_accepted(fuse_req_t req, int level, const char *what, const char *file,
		  const char *command);

/* loop.c */
/* The loop of fs's session, at most max_workers threads besides the one
 * that runs it: loop_new(); loop_run() on a thread of its own until the
 * session ends (0 or -errno); loop_interrupt() wakes the receiving thread
 * out of its wait once fuse_session_exit() was called (again until the
 * run returns: the signal may land just before the wait); loop_free() after
 * the run returned. */
int loop_new(struct vffs *fs, unsigned max_workers, struct loop **ret);
int loop_run(struct loop *l);
void loop_interrupt(struct loop *l);
void loop_free(struct loop *l);
/* Whether the calling thread holds the receiving role (request_class()). */
bool loop_on_receiver(void);
/* Called by a writer's request about to be answered: if its thread lent the
 * receiving thread's watch of /dev/fuse for it (loop.c, lend()), the watch
 * ends now, before the reply, so that the request the reply lets come (the
 * READ of an outcome) does not wake the idle worker only to find it gone. */
void loop_lend_end(void);
/* An op on the receiving thread that finds it would wait after all (a
 * write that cannot join the commit under way): req is dropped unanswered
 * and a worker serves the request anew, from the bytes the loop still
 * holds. */
void loop_pass_on(fuse_req_t req);

/* mount.c */
int mkdir_p(const char *path, mode_t mode);
bool can_mount(void);
int clear_mountpoint(struct vffs *fs);

#endif
