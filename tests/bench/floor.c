/* SPDX-License-Identifier: MIT */
/* floor.c - what the FUSE floors share (floor.h). */
#include "floor.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TIMEOUT_S 86400.0

static const struct floor_file *floor_files;
static size_t floor_n_files;

static int floor_stat(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	if (ino < 2 || ino - 2 >= floor_n_files)
		return -ENOENT;
	st->st_mode = S_IFREG | floor_files[ino - 2].mode;
	st->st_nlink = 1;
	st->st_size = floor_files[ino - 2].size;
	return 0;
}

static void floor_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_AUTO_INVAL_DATA |
				  FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_ATOMIC_O_TRUNC);
}

static void floor_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e = { .generation = 1,
				      .attr_timeout = TIMEOUT_S,
				      .entry_timeout = 1.0 };

	for (size_t i = 0; parent == FUSE_ROOT_ID && i < floor_n_files; i++)
		if (strcmp(name, floor_files[i].name) == 0) {
			e.ino = i + 2;
			floor_stat(e.ino, &e.attr);
			fuse_reply_entry(req, &e);
			return;
		}
	fuse_reply_err(req, ENOENT);
}

static void floor_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int r = floor_stat(ino, &st);

	(void)fi;
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_attr(req, &st, TIMEOUT_S);
}

void floor_reply_window(fuse_req_t req, const char *text, size_t len, size_t size, off_t off)
{
	if (off < 0 || (size_t)off >= len)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_buf(req, text + off,
			       size < len - (size_t)off ? size : len - (size_t)off);
}

int floor_main(int argc, char **argv, const char *usage, const struct floor_file *files,
	       size_t n_files, struct fuse_lowlevel_ops *ops, int (*setup)(const char *arg))
{
	static char dash_o[] = "-o";
	char options[128];
	const char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	char *opts[] = { argv[0], dash_o, options, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, opts);
	struct fuse_session *se;
	int r = 1;
	long workers = argc == 4 ? strtol(argv[3], NULL, 10) : FLOOR_WORKERS;

	if ((argc != 3 && argc != 4) || workers < 0 || workers > 256) {
		fprintf(stderr, "usage: %s\n", usage);
		return 2;
	}
	snprintf(options, sizeof(options), "allow_other,default_permissions,fsname=%s", name);
	floor_files = files;
	floor_n_files = n_files;
	ops->init = floor_init;
	ops->lookup = floor_lookup;
	ops->getattr = floor_getattr;
	if (setup(argv[2]) != 0)
		return 1;
	se = fuse_session_new(&args, ops, sizeof(*ops), NULL);
	if (se && fuse_set_signal_handlers(se) == 0 && fuse_session_mount(se, argv[1]) == 0) {
		struct fuse_loop_config *cfg = workers ? fuse_loop_cfg_create() : NULL;
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
	return r;
}
