/* SPDX-License-Identifier: MIT */
/*
 * reportfloor.c - the floor of a durable report through FUSE on this
 * machine: a FUSE server mounted as vfhealthd mounts whose one file,
 * `report`, commits the bare SQLite loop's row (barecommit.h) at every
 * write and answers the read that follows with the outcome, as VF/report
 * does, with nothing else: no store, no mirror, no notifier, no log.
 * What vfhealthd's reports cost above this is its own; what this costs
 * above the bare loop is the round trips (OPEN, WRITE, READ) a report
 * through any FUSE file pays here (run-benchmarks.sh prints both).
 * WORKERS as in fusefloor.c (default 16, libfuse's multi-threaded loop;
 * 0 serves from one thread).
 *
 *   reportfloor MOUNTPOINT DB [WORKERS]   serve until unmounted or SIGTERM
 *
 *   # mkdir -p /tmp/rf && build-rel/tests/bench/reportfloor /tmp/rf /var/tmp/rf.db &
 *   # build-rel/tests/bench/vfbench reports /tmp/rf/report 200
 *   2614.2
 *   # fusermount3 -u /tmp/rf
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <fuse_lowlevel.h>

#include "barecommit.h"

#define REPORT_INO 2
#define REPORT_NAME "report"
#define OUTCOME "recorded\n"
#define TIMEOUT_S 86400.0
#define WORKERS 16
#define WARM 200 /* untimed commits before serving (barecommit.h) */

static struct bare_loop *bare;
static pthread_mutex_t bare_lock = PTHREAD_MUTEX_INITIALIZER;

/* One open report file: whether a write through it was committed. */
struct handle {
	int committed;
};

static void floor_stat(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = ino == FUSE_ROOT_ID ? S_IFDIR | 0755 : S_IFREG | 0666;
	st->st_nlink = ino == FUSE_ROOT_ID ? 2 : 1;
}

static void floor_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_AUTO_INVAL_DATA |
				  FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_ATOMIC_O_TRUNC);
}

static void floor_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e = {
		.ino = REPORT_INO, .generation = 1, .attr_timeout = TIMEOUT_S, .entry_timeout = 1.0
	};

	if (parent != FUSE_ROOT_ID || strcmp(name, REPORT_NAME) != 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	floor_stat(e.ino, &e.attr);
	fuse_reply_entry(req, &e);
}

static void floor_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	floor_stat(ino, &st);
	fuse_reply_attr(req, &st, TIMEOUT_S);
}

static void floor_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct handle *h;

	if (ino == FUSE_ROOT_ID) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fi->fh = (uintptr_t)h;
	fi->direct_io = 1;
	fi->noflush = 1;
	fuse_reply_open(req, fi);
}

static void floor_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	int r;

	(void)ino;
	(void)buf;
	(void)off;
	pthread_mutex_lock(&bare_lock);
	r = bare_commit(bare);
	pthread_mutex_unlock(&bare_lock);
	h->committed = r == 0;
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_write(req, size);
}

static void floor_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	const struct handle *h = (const struct handle *)(uintptr_t)fi->fh;
	size_t len = h->committed ? strlen(OUTCOME) : 0;

	(void)ino;
	if ((size_t)off >= len)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_buf(req, OUTCOME + off,
			       size < len - (size_t)off ? size : len - (size_t)off);
}

static void floor_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	free((void *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static const struct fuse_lowlevel_ops floor_ops = {
	.init = floor_init,
	.lookup = floor_lookup,
	.getattr = floor_getattr,
	.open = floor_open,
	.write = floor_write,
	.read = floor_read,
	.release = floor_release,
};

int main(int argc, char **argv)
{
	static char dash_o[] = "-o",
		    options[] = "allow_other,default_permissions,fsname=reportfloor";
	char *opts[] = { argv[0], dash_o, options, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, opts);
	struct fuse_loop_config *cfg;
	struct fuse_session *se;
	int r = 1;
	long workers = argc == 4 ? strtol(argv[3], NULL, 10) : WORKERS;

	if ((argc != 3 && argc != 4) || workers < 0 || workers > 256) {
		fprintf(stderr, "usage: reportfloor MOUNTPOINT DB [WORKERS]\n");
		return 2;
	}
	if (bare_open(argv[2], WARM, &bare) < 0)
		return 1;
	se = fuse_session_new(&args, &floor_ops, sizeof(floor_ops), NULL);
	if (se && fuse_set_signal_handlers(se) == 0 && fuse_session_mount(se, argv[1]) == 0) {
		cfg = workers ? fuse_loop_cfg_create() : NULL;
		if (cfg) {
			fuse_loop_cfg_set_clone_fd(cfg, 0);
			fuse_loop_cfg_set_max_threads(cfg, (unsigned)workers);
			r = fuse_session_loop_mt(se, cfg) < 0;
			fuse_loop_cfg_destroy(cfg);
		} else if (!workers) {
			r = fuse_session_loop(se) < 0;
		}
		fuse_session_unmount(se);
	}
	if (se) {
		fuse_remove_signal_handlers(se);
		fuse_session_destroy(se);
	}
	bare_close(bare);
	return r;
}
