/* SPDX-License-Identifier: MIT */
/*
 * listing.c - directory handles and listings: opendir, readdir,
 * readdirplus, releasedir.  The listing is rendered by the readdir at
 * offset 0 into the directory handle, charged to the uid that opened it
 * (budget.h), and later offsets are served from it.
 */
#include "fs/vffs-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct dirbuf {
	fuse_req_t req;
	struct vffs *fs;
	bool plus; /* readdirplus: entries carry their attributes */
	char *buf;
	size_t size;     /* bytes of entries */
	size_t capacity; /* bytes allocated: grows geometrically, so a listing of
			  * 65,536 VFs is not 65,536 reallocs and copies */
	int error;
};

/* An entry; child: what it names, for readdirplus (NULL for . and ..,
 * which the kernel never looks up from a listing). */
static void dirbuf_add(struct dirbuf *b, const char *name, fuse_ino_t ino, mode_t mode,
		       const struct vnode *child)
{
	struct stat st = { .st_ino = ino, .st_mode = mode };
	struct fuse_entry_param e = { .attr = st };
	size_t old = b->size, len;
	char *grown;

	if (b->error)
		return;
	if (b->plus && child)
		fill_entry(b->fs, ino, child, &e);
	len = b->plus ? fuse_add_direntry_plus(b->req, NULL, 0, name, NULL, 0) :
			fuse_add_direntry(b->req, NULL, 0, name, NULL, 0);
	if (old + len > b->capacity) {
		size_t capacity = MAX(2 * b->capacity, MAX(old + len, (size_t)4096));

		grown = realloc(b->buf, capacity);
		if (!grown) {
			b->error = -ENOMEM;
			return;
		}
		b->buf = grown;
		b->capacity = capacity;
	}
	b->size = old + len;
	if (b->plus)
		fuse_add_direntry_plus(b->req, b->buf + old, len, name, &e, (off_t)b->size);
	else
		fuse_add_direntry(b->req, b->buf + old, len, name, &st, (off_t)b->size);
}

/* Every listing's first two entries: the directory ino and its parent. */
static void dirbuf_add_dots(struct dirbuf *b, fuse_ino_t ino, fuse_ino_t parent)
{
	dirbuf_add(b, ".", ino, S_IFDIR, NULL);
	dirbuf_add(b, "..", parent, S_IFDIR, NULL);
}

static int list_directory(struct vffs *fs, fuse_ino_t ino, const struct vnode *n, struct dirbuf *b)
{
	int r;

	switch (n->kind) {
	case VN_ROOT: {
		_cleanup_free_ struct store_vf_info *vfs = NULL;
		size_t count = 0;

		/* A store that could not even be loaded lists no VFs, but the
		 * top-level files (status says why) must still show. */
		r = store_vf_list(fs->store, &vfs, &count);
		if (r < 0 && r != -EIO)
			return r;
		dirbuf_add_dots(b, ino, INO_ROOT);
		for (int i = 0; i < TOP_FILE_COUNT; i++) {
			struct vnode c = { .kind = VN_TOP, .index = i };
			dirbuf_add(b, top_files[i].name, INO_TOP_BASE + (fuse_ino_t)i,
				   (top_files[i].flags & VFILE_DIR) ? S_IFDIR : S_IFREG, &c);
		}
		for (size_t i = 0; i < count; i++) {
			struct vnode c = { .kind = VN_VF_DIR, .vf = vfs[i] };
			dirbuf_add(b, vfs[i].vf, ino_vf(vfs[i].id, VF_SLOT_DIR), S_IFDIR, &c);
		}
		return b->error;
	}
	case VN_VF_DIR:
		dirbuf_add_dots(b, ino, INO_ROOT);
		for (int i = 0; i < VF_FILE_COUNT; i++) {
			struct vnode c = { .kind = VN_VF_ENTRY, .index = i, .vf = n->vf };
			dirbuf_add(b, vf_files[i].name, ino_vf(n->vf.id, 1 + i),
				   (vf_files[i].flags & VFILE_DIR) ? S_IFDIR : S_IFREG, &c);
		}
		return b->error;
	case VN_VF_ENTRY: {
		_cleanup_free_ struct store_claim *claims = NULL;
		size_t count = 0;

		if (!vnode_is_claim_dir(n))
			return -ENOTDIR;
		r = store_claim_list(fs->store, n->vf.vf, &claims, &count);
		if (r < 0)
			return r;
		dirbuf_add_dots(b, ino, ino_vf(n->vf.id, VF_SLOT_DIR));
		for (size_t i = 0; i < count; i++) {
			struct vnode c = { .kind = VN_CLAIM, .claim = claims[i] };
			c.vf.id = n->vf.id;
			dirbuf_add(b, claims[i].a.instance_id, ino_claim(n->vf.id, claims[i].id),
				   S_IFREG, &c);
		}
		return b->error;
	}
	case VN_TOP: {
		_cleanup_free_ struct store_gpu_info *gpus = NULL;
		size_t count = 0;

		if (n->index != TOP_GPUS)
			return -ENOTDIR;
		r = store_gpu_list(fs->store, &gpus, &count);
		if (r < 0 && r != -EIO)
			return r;
		dirbuf_add_dots(b, ino, INO_ROOT);
		for (size_t i = 0; i < count; i++) {
			struct vnode c = { .kind = VN_GPU_DIR };
			memcpy(c.gpu, gpus[i].parent, sizeof(c.gpu));
			dirbuf_add(b, gpus[i].parent, ino_gpu(gpus[i].parent, 0), S_IFDIR, &c);
		}
		return b->error;
	}
	case VN_GPU_DIR:
		dirbuf_add_dots(b, ino, INO_TOP_BASE + TOP_GPUS);
		for (int i = 0; i < GPU_FILE_COUNT; i++) {
			struct vnode c = { .kind = VN_GPU_ENTRY, .index = i };
			memcpy(c.gpu, n->gpu, sizeof(c.gpu));
			dirbuf_add(b, gpu_files[i].name, ino_gpu(n->gpu, 1 + i), S_IFREG, &c);
		}
		return b->error;
	default:
		return -ENOTDIR;
	}
}

static void dirhandle_free(struct vffs *fs, struct dirhandle *d)
{
	if (!d)
		return;
	open_link_remove(fs, &d->link);
	budget_release(fs->budget, d->open_uid, d->size);
	budget_release(fs->budget, d->open_uid, sizeof(*d));
	pthread_mutex_destroy(&d->lock);
	free(d->buf);
	free(d);
}

static void dirhandle_free_link(struct vffs *fs, struct open_link *l)
{
	dirhandle_free(fs, (struct dirhandle *)l);
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct vnode n;
	struct dirhandle *d;
	uid_t uid;
	int r;

	if (!vnode_get_or_reply(req, ino, &n))
		return;
	if ((n.kind == VN_TOP && !(top_files[n.index].flags & VFILE_DIR)) || n.kind == VN_CLAIM ||
	    n.kind == VN_GPU_ENTRY || (n.kind == VN_VF_ENTRY && !vnode_is_claim_dir(&n))) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	uid = fuse_req_ctx(req)->uid;
	r = charge(req_fs(req), uid, sizeof(*d));
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		budget_release(req_fs(req)->budget, uid, sizeof(*d));
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_init(&d->lock, NULL);
	d->open_uid = uid;
	open_link_add(req_fs(req), &d->link, dirhandle_free_link);
	fi->fh = (uintptr_t)d;
	/* The root's and a VF directory's entries change only by mkdir and
	 * rmdir through the mount (the kernel drops its cached listing for
	 * those itself) and when the store is first loaded (the notifier
	 * invalidates the root): the kernel may keep their listings.  Claims
	 * come and go by writes: assignments/ is listed afresh every time. */
	fi->cache_readdir = fi->keep_cache = n.kind == VN_ROOT || n.kind == VN_VF_DIR;
	if (fuse_reply_open(req, fi) < 0)
		dirhandle_free(req_fs(req), d);
}

/* READDIR and READDIRPLUS: the kernel uses one or the other for an open
 * directory (plus always: readdirplus is not "auto"); a listing taken for
 * one is never served to the other. */
static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi, bool plus)
{
	struct vffs *fs = req_fs(req);
	struct dirhandle *d = (struct dirhandle *)(uintptr_t)fi->fh;
	_cleanup_free_ char *reply = NULL;
	size_t len = 0;

	pthread_mutex_lock(&d->lock);
	if (off == 0 || !d->buf || d->plus != plus) {
		/* A listing from the start: take it afresh. */
		struct vnode n = { 0 };
		struct dirbuf b = { .req = req, .fs = fs, .plus = plus };
		int r = vnode_resolve(fs, ino, &n);

		if (r == 0)
			r = list_directory(fs, ino, &n, &b);
		if (r == 0)
			r = charge(fs, d->open_uid, b.size); /* the opener's, whoever reads */
		if (r < 0) {
			free(b.buf);
			pthread_mutex_unlock(&d->lock);
			fuse_reply_err(req, -r);
			return;
		}
		budget_release(fs->budget, d->open_uid, d->size);
		free(d->buf);
		d->buf = b.buf;
		d->size = b.size;
		d->plus = plus;
	}
	int r = copy_window(d->buf, d->size, off, size, &reply, &len);
	pthread_mutex_unlock(&d->lock);
	reply_read(req, r, reply, len);
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, false);
}

void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, true);
}

void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	dirhandle_free(req_fs(req), (struct dirhandle *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}
