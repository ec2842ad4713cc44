/* SPDX-License-Identifier: MIT */
/*
 * vfiles.h - THE table of virtual files under /run/vfhealth (see vfhealth(5)).
 *
 * top_files[] lists the top-level files, vf_files[] the entries of a VF
 * directory and gpu_files[] those of a parent GPU's (gpus/PF/); lookup, getattr, readdir, open, read, write and the notifier
 * all go through these two tables, indexed by the enums below.  No other
 * code names these files, nor knows which store change alters which file:
 * that is the table's `changes` column (see struct vfile).
 *
 * A render function writes the whole current content of a file to `out`
 * (the filesystem keeps it as the snapshot of the open file) and returns 0
 * or a negative errno.  A write function gets one whole command (NUL
 * terminated, one trailing newline already stripped), validates all of it
 * before calling the store, and returns 0 or a negative errno that becomes
 * the write(2)'s error; bad input changes nothing.  Files that read back the
 * outcome of the last write on the same open file (`report`) put that text
 * into call->outcome.
 *
 * The claim_* functions serve the assignment files (<vf>/assignments/<id>),
 * whose names are the claims themselves rather than table entries.
 */
#ifndef VFHEALTH_VFILES_H
#define VFHEALTH_VFILES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "grammar/report.h"

#include "grammar/limits.h"
#include "store/store.h"

/* Longest command one write(2) may carry; longer ones get EINVAL. */
#define VFILE_COMMAND_MAX WRITE_COMMAND_MAX
/* Room for an outcome line (without its newline) and its NUL. */
#define VFILE_OUTCOME_MAX OUTCOME_LINE_BUFSZ

enum top_file_index {
	TOP_THRESHOLD,
	TOP_QUARANTINED,
	TOP_RESOURCES,
	TOP_STATUS,
	TOP_MAX_QUARANTINED,
	TOP_METRICS,
	TOP_HELD_BACK, /* new entries go last: the index names the inode */
	TOP_ALLOCATABLE,
	TOP_CLAIMS,
	TOP_MODE,
	TOP_GPUS, /* the gpus/ directory: one directory per parent GPU */
	TOP_AUTO_RECOVER,
	TOP_FILE_COUNT
};

enum vf_file_index {
	VF_TALLY,
	VF_QUARANTINED,
	VF_FAILURES,
	VF_REPORT,
	VF_ASSIGNMENTS, /* the assignments/ directory */
	VF_STATE,       /* new entries go last: the index names the inode */
	VF_SINCE,
	VF_PARENT,
	VF_HISTORY,
	VF_FILE_COUNT
};

/* The entries of a parent GPU's directory, gpus/PF/ (fs/gpus.h). */
enum gpu_file_index {
	GPU_VFS,
	GPU_STATE,
	GPU_DRAIN, /* new entries go last: the index names the inode */
	GPU_HISTORY,
	GPU_RECOVER,
	GPU_FILE_COUNT
};

enum vfile_flags {
	VFILE_DIR = 1 << 0,       /* a directory, not a file */
	VFILE_NOTIFY = 1 << 1,    /* content changes are notified (inotify, poll) */
	VFILE_OUTCOME = 1 << 2,   /* reads show the outcome of the last write on the handle */
	VFILE_CLAIM_DIR = 1 << 3, /* a VFILE_DIR whose entries are the VF's claims: it can be
				   * listed, and takes create, lookup and unlink of claims */
	VFILE_PLACEMENT = 1 << 4, /* placement-facing: fails closed while the store is
				   * unavailable, and a read of it by a requester who may
				   * write first retries the store (handle.c, read_may_repair) */
};

struct metrics;

/* What a render or write function works on.  A render reads the store as
 * `read` says: whether a read may repair an unavailable store is decided
 * once per request, from the reader's rights and the file's
 * VFILE_PLACEMENT, by handle.c (read_may_repair), never by a render
 * function. */
struct vfile_call {
	struct store *store;
	struct metrics *metrics;   /* extra series of `metrics` (fs/metrics.h); may be NULL */
	struct recovery *recovery; /* GPU cycles (recovery/recovery.h); NULL: none run */
	const char *sysfs_root;    /* --sysfs-root: a VF's parent, a GPU's VFs (NULL: /sys) */
	const char *vf;            /* per-VF files: the VF address; per-GPU files: the GPU's */
	uint64_t vf_id;            /* per-VF files: the VF's id */
	enum store_read read;      /* renders: how placement-facing reads are made
			       * (STORE_READ_NORETRY, the zero value, unless
			       * read_may_repair said otherwise) */
	char *outcome;             /* VFILE_OUTCOME writes: VFILE_OUTCOME_MAX bytes */
	const char **why;          /* a write refused by a grammar says here which rule (a
			      * static string) for the caller to log; may be NULL */
	int64_t uid;               /* writes: the writer's uid, kept in the history (-1: none) */
	int32_t pid;               /* writes: the writer's pid, for the log */
	bool *unchanged;           /* writes: set when the command changed nothing, or
			      * nothing but routine state (a failure below the
			      * threshold that is not the VF's first): no audit
			      * line; may be NULL */
};

typedef int (*vfile_render_fn)(const struct vfile_call *call, FILE *out);
typedef int (*vfile_write_fn)(const struct vfile_call *call, char *command);

/* A write answered by the thread that commits it: its worker queues it
 * behind the commit under way and goes on to the next request (the store's
 * answerer, store/commit.c).  The caller sets call (outcome, why and
 * unchanged pointing at the fields below, or NULL) and answer, and keeps
 * the command until the answer; the vfile keeps in `own` what its answer
 * needs of the command (which may point into it).  answer(d, r) is
 * called once, on the store's answerer thread with no lock held, with what
 * write would have returned, and must reply to the writer (d is the
 * caller's to free there). */
struct vfile_deferred {
	struct vfile_call call;
	char outcome[VFILE_OUTCOME_MAX];
	const char *why;
	bool unchanged;
	void (*answer)(struct vfile_deferred *d, int r);
	union {
		struct report_command report;
	} own;
};

/* 0: queued, d->answer will be called; else nothing was queued and answer
 * is never called: -EAGAIN, write the command with the file's write
 * (nothing to join, or a command it does not queue); any other -errno is
 * the write's refusal, with d->why set as write sets it. */
typedef int (*vfile_submit_fn)(struct vfile_deferred *d, const char *command);

struct vfile {
	const char *name;
	mode_t mode;            /* permission bits; S_IFDIR is added for VFILE_DIR */
	vfile_render_fn render; /* NULL: reads show the outcome (VFILE_OUTCOME) or nothing */
	vfile_write_fn write;   /* NULL: read-only */
	unsigned flags;
	/* The store_change bits (store/store.h) that change what this file says;
	 * the notifier dirties exactly these (VFILE_NOTIFY files only).  A
	 * per-VF file is dirtied for the VF a change names, and for every VF
	 * when the change names none (a store-wide change such as status). */
	unsigned changes;
	/* Nonzero: every rendering is exactly this many bytes, so the file
	 * reports it as its size and read-only opens are served from the page
	 * cache (keep_cache, handle.c), which the notifier invalidates (the
	 * ordering rule, docs/architecture.md).  Such a file must be
	 * VFILE_NOTIFY.  0: the size is only known by rendering: size 0 and
	 * direct_io (a page-cached file whose length changes tears: size from
	 * one moment, content from a later one). */
	unsigned fixed_size;
	vfile_submit_fn submit; /* NULL: every write is answered by its worker (write) */
};

/* Whether readers of f are served from the page cache: its inode falls
 * under the ordering rule (docs/architecture.md); every
 * other file reads through to the daemon at every read. */
static inline bool vfile_page_cached(const struct vfile *f)
{
	return f->fixed_size && (f->flags & VFILE_NOTIFY);
}

extern const struct vfile top_files[TOP_FILE_COUNT];
extern const struct vfile vf_files[VF_FILE_COUNT];
extern const struct vfile gpu_files[GPU_FILE_COUNT];

/* Index of name in table[count], or -1. */
int vfile_find(const struct vfile *table, int count, const char *name);

#endif
