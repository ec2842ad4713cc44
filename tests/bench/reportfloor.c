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
 * Mounted and served as floor.h says (WORKERS as in fusefloor.c).
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
#include <stdlib.h>
#include <string.h>

#include "barecommit.h"
#include "floor.h"

#define OUTCOME "recorded\n"
#define WARM 200 /* untimed commits before serving (barecommit.h) */

static const struct floor_file files[] = { { "report", 0666, 0 } };
static struct bare_loop *bare;
static pthread_mutex_t bare_lock = PTHREAD_MUTEX_INITIALIZER;

/* One open report file: whether a write through it was committed. */
struct handle {
	int committed;
};

static int open_bare(const char *db)
{
	return bare_open(db, WARM, &bare) < 0;
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
	floor_reply_window(req, OUTCOME, len, size, off);
}

static void floor_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	free((void *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

int main(int argc, char **argv)
{
	struct fuse_lowlevel_ops ops = {
		.open = floor_open,
		.write = floor_write,
		.read = floor_read,
		.release = floor_release,
	};
	int r = floor_main(argc, argv, "reportfloor MOUNTPOINT DB [WORKERS]", files,
			   sizeof(files) / sizeof(files[0]), &ops, open_bare);

	bare_close(bare);
	return r;
}
