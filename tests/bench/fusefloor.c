/* SPDX-License-Identifier: MIT */
/*
 * fusefloor.c - the floor of a read through FUSE on this machine: a FUSE
 * server that does nothing but answer, mounted the way vfhealthd mounts (the
 * same mount options and capabilities, attributes and entries cached as
 * long), with no store, no handle, no budget: each request is one reply.
 * Two files in the root:
 *   quarantined  "0\n", opened keep_cache, as VF/quarantined is
 *   list         the content of LIST_FILE (at most 4 KiB, read at start),
 *                size 0 and opened direct_io, as a top-level list is
 * What vfhealthd costs above this is its own; what this costs above tmpfs is
 * the kernel's round trip to a server (run-benchmarks.sh prints both).
 * WORKERS (default 16) is libfuse's multi-threaded loop's threads at most;
 * 0 serves from one thread (fuse_session_loop), as vfhealthd's loop serves
 * a read (fs/loop.c): how much of the round trip is the multi-threaded
 * loop's (its idle threads are woken in turn, the one that waited longest
 * first, so a lone reader's requests land on a thread that is cold, often
 * on the other CPU).
 *
 *   fusefloor MOUNTPOINT LIST_FILE [WORKERS]   serve until unmounted or SIGTERM
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <fuse_lowlevel.h>

#define FLOOR_INO 2
#define FLOOR_NAME "quarantined"
#define FLOOR_TEXT "0\n"
#define LIST_INO 3
#define LIST_NAME "list"

static char list_text[4096];
static size_t list_len;
#define TIMEOUT_S 86400.0
#define WORKERS 16 /* vfhealthd's default --fuse-workers */

static void floor_stat(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = ino == FLOOR_INO ? (off_t)strlen(FLOOR_TEXT) : 0;
	}
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
		.ino = FLOOR_INO, .generation = 1, .attr_timeout = TIMEOUT_S, .entry_timeout = 1.0
	};

	if (parent == FUSE_ROOT_ID && strcmp(name, LIST_NAME) == 0)
		e.ino = LIST_INO;
	else if (parent != FUSE_ROOT_ID || strcmp(name, FLOOR_NAME) != 0) {
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
	if (ino == FUSE_ROOT_ID) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	fi->keep_cache = ino == FLOOR_INO;
	fi->direct_io = ino == LIST_INO;
	fi->noflush = 1;
	fuse_reply_open(req, fi);
}

static void floor_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	const char *text = ino == FLOOR_INO ? FLOOR_TEXT : list_text;
	size_t len = ino == FLOOR_INO ? strlen(FLOOR_TEXT) : list_len;

	(void)fi;
	if ((size_t)off >= len)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_buf(req, text + off,
			       size < len - (size_t)off ? size : len - (size_t)off);
}

static void floor_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static const struct fuse_lowlevel_ops floor_ops = {
	.init = floor_init,
	.lookup = floor_lookup,
	.getattr = floor_getattr,
	.open = floor_open,
	.read = floor_read,
	.release = floor_release,
};

int main(int argc, char **argv)
{
	static char dash_o[] = "-o", options[] = "allow_other,default_permissions,fsname=fusefloor";
	char *opts[] = { argv[0], dash_o, options, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, opts);
	struct fuse_loop_config *cfg;
	struct fuse_session *se;
	int r = 1;

	FILE *list;
	long workers = argc == 4 ? strtol(argv[3], NULL, 10) : WORKERS;

	if ((argc != 3 && argc != 4) || workers < 0 || workers > 256) {
		fprintf(stderr, "usage: fusefloor MOUNTPOINT LIST_FILE [WORKERS]\n");
		return 2;
	}
	list = fopen(argv[2], "re");
	if (!list) {
		perror(argv[2]);
		return 1;
	}
	list_len = fread(list_text, 1, sizeof(list_text), list);
	fclose(list);
	se = fuse_session_new(&args, &floor_ops, sizeof(floor_ops), NULL);
	if (!se)
		return 1;
	if (fuse_set_signal_handlers(se) == 0 && fuse_session_mount(se, argv[1]) == 0) {
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
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	return r;
}
