/* SPDX-License-Identifier: MIT */
/*
 * inode.c - inode numbers and the vnodes they name (vffs-internal.h):
 * encoding, resolving against the store, attributes, entries.
 *
 * Inodes are computed from store ids, stable and never reused, so forget is
 * a no-op and nothing maps inodes in memory:
 *   1                     the root
 *   16 + i                top_files[i]
 *   1<<60 | id<<8 | 0     the directory of the VF with store id `id`
 *   1<<60 | id<<8 | 1+i   vf_files[i] of that VF (assignments/ included)
 *   2<<60 | vf id<<36 | claim id   an assignment file (the VF's id, so
 *                         that resolving it is a search, not a scan)
 *   3<<60 | addr<<8 | 0   the directory of the parent GPU whose address
 *                         packs to addr (fs/gpus.h: a GPU has no store id)
 *   3<<60 | addr<<8 | 1+i gpu_files[i] of that GPU
 * Files whose every rendering has the same length (vfile.fixed_size:
 * VF/quarantined) report that size; other regular files report size 0
 * (procfs): the size is known only by rendering.  Entries are cached for
 * 1 s, negative entries never; attributes long (vffs.c, Caching).
 */
#include "fs/vffs-internal.h"

#include "fs/gpus.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

fuse_ino_t ino_vf(uint64_t id, int slot)
{
	return (INO_KIND_VF << INO_KIND_SHIFT) | (id << 8) | (unsigned)slot;
}

/* A claim's VF id in its inode makes its lookup a search, not a scan; a
 * VF id beyond INO_CLAIM_VF_BITS is left out (0) and scanned for. */
fuse_ino_t ino_claim(uint64_t vf_id, uint64_t id)
{
	if (vf_id >> INO_CLAIM_VF_BITS)
		vf_id = 0;
	return (INO_KIND_CLAIM << INO_KIND_SHIFT) | (vf_id << INO_CLAIM_ID_BITS) |
	       (id & ((1ULL << INO_CLAIM_ID_BITS) - 1));
}

fuse_ino_t ino_gpu(const char *gpu, int slot)
{
	uint32_t packed;

	if (gpu_addr_pack(gpu, &packed) < 0)
		return 0;
	return (INO_KIND_GPU << INO_KIND_SHIFT) | ((uint64_t)packed << 8) | (unsigned)slot;
}

/* A GPU directory's name: a parent some registered VF names (from memory,
 * like a VF's name). */
int lookup_gpu(struct vffs *fs, const char *gpu)
{
	struct store_gpu_info g;

	return vf_address_valid(gpu) ? store_gpu_get(fs->store, gpu, STORE_READ_MEMORY, &g) :
				       -ENOENT;
}

int vnode_resolve(struct vffs *fs, fuse_ino_t ino, struct vnode *n)
{
	uint64_t kind = ino >> INO_KIND_SHIFT, id;
	int r;

	memset(n, 0, offsetof(struct vnode, claim));
	if (ino == INO_ROOT) {
		n->kind = VN_ROOT;
		return 0;
	}
	if (ino >= INO_TOP_BASE && ino < INO_TOP_BASE + TOP_FILE_COUNT) {
		n->kind = VN_TOP;
		n->index = (int)(ino - INO_TOP_BASE);
		return 0;
	}
	if (kind == INO_KIND_VF) {
		unsigned slot = ino & 0xff;
		id = (ino & INO_ID_MASK) >> 8;
		if (slot > VF_FILE_COUNT)
			return -ENOENT;
		r = store_vf_get_by_id(fs->store, id, &n->vf);
		if (r < 0)
			return r;
		n->kind = slot == VF_SLOT_DIR ? VN_VF_DIR : VN_VF_ENTRY;
		n->index = (int)slot - 1;
		return 0;
	}
	if (kind == INO_KIND_GPU) {
		unsigned slot = ino & 0xff;
		if (slot > GPU_FILE_COUNT || ((ino & INO_ID_MASK) >> 40))
			return -ENOENT;
		gpu_addr_unpack((uint32_t)((ino & INO_ID_MASK) >> 8), n->gpu);
		if ((r = lookup_gpu(fs, n->gpu)) < 0)
			return r;
		n->kind = slot == 0 ? VN_GPU_DIR : VN_GPU_ENTRY;
		n->index = (int)slot - 1;
		return 0;
	}
	if (kind == INO_KIND_CLAIM) {
		uint64_t vf_id = (ino & INO_ID_MASK) >> INO_CLAIM_ID_BITS;
		id = ino & ((1ULL << INO_CLAIM_ID_BITS) - 1);
		r = store_claim_get_by_id(fs->store, vf_id, id, &n->claim);
		if (r < 0)
			return r;
		n->kind = VN_CLAIM;
		n->vf.id = vf_id;
		return 0;
	}
	return -ENOENT;
}

/* Whether n is a VF's claim directory (assignments/): the one node that is
 * listed from, and takes create, lookup and unlink of, claims. */
bool vnode_is_claim_dir(const struct vnode *n)
{
	return n->kind == VN_VF_ENTRY && (vf_files[n->index].flags & VFILE_CLAIM_DIR);
}

/* The notify key of a file, false for things that are not notified. */
bool vnode_key(const struct vnode *n, struct notify_key *key)
{
	memset(key, 0, sizeof(*key));
	key->index = n->index;
	switch (n->kind) {
	case VN_TOP:
		key->scope = NOTIFY_TOP;
		return true;
	case VN_VF_ENTRY:
		key->scope = NOTIFY_VF;
		snprintf(key->addr, sizeof(key->addr), "%s", n->vf.vf);
		return true;
	case VN_GPU_ENTRY:
		key->scope = NOTIFY_GPU;
		snprintf(key->addr, sizeof(key->addr), "%s", n->gpu);
		return true;
	default:
		return false;
	}
}

/* The table entry (vfiles.c) of a top-level or per-VF file; NULL for the
 * root, VF directories and claims. */
const struct vfile *vfile_of(enum vnode_kind kind, int index)
{
	return kind == VN_TOP       ? &top_files[index] :
	       kind == VN_VF_ENTRY  ? &vf_files[index] :
	       kind == VN_GPU_ENTRY ? &gpu_files[index] :
				      NULL;
}

void vnode_stat(struct vffs *fs, fuse_ino_t ino, const struct vnode *n, struct stat *st)
{
	struct notify_key key;
	struct timespec t = fs->start_time;
	const struct vfile *f = NULL;

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = 0;
	st->st_gid = fs->group;
	st->st_blksize = FILE_BLOCK_SIZE;
	switch (n->kind) {
	case VN_ROOT:
		st->st_mode = S_IFDIR | 0775;
		st->st_nlink = 2;
		break;
	case VN_VF_DIR:
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 3;
		break;
	case VN_GPU_DIR:
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		break;
	case VN_GPU_ENTRY:
		f = &gpu_files[n->index];
		break;
	case VN_TOP:
		f = &top_files[n->index];
		break;
	case VN_VF_ENTRY:
		f = &vf_files[n->index];
		break;
	case VN_CLAIM:
		st->st_mode = S_IFREG | 0664;
		st->st_nlink = 1;
		st->st_size = FILE_SIZE;
		break;
	}
	if (f && (f->flags & VFILE_DIR)) {
		st->st_mode = S_IFDIR | f->mode;
		st->st_nlink = 2;
	} else if (f) {
		st->st_mode = S_IFREG | f->mode;
		st->st_nlink = 1;
		st->st_size = f->fixed_size ? (off_t)f->fixed_size : FILE_SIZE;
	}
	if (vnode_key(n, &key))
		notifier_mtime(fs->notifier, &key, &t);
	st->st_atim = st->st_mtim = st->st_ctim = t;
}

/* Every inode's attributes are fixed for its life, a claim's too (its
 * inode is the claim: a new claim is a new inode), so each is cached long:
 * an open of an assignment file, whose entry is not cached, costs no
 * GETATTR after its LOOKUP. */
double attr_timeout(const struct vnode *n)
{
	return ATTR_TIMEOUT_S;
}

void fill_entry(struct vffs *fs, fuse_ino_t ino, const struct vnode *n, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->generation = GENERATION;
	e->attr_timeout = attr_timeout(n);
	e->entry_timeout = n->kind == VN_CLAIM ? 0 : ENTRY_TIMEOUT_S;
	vnode_stat(fs, ino, n, &e->attr);
}

void reply_entry(fuse_req_t req, fuse_ino_t ino, const struct vnode *n)
{
	struct fuse_entry_param e;

	fill_entry(req_fs(req), ino, n, &e);
	fuse_reply_entry(req, &e);
}

/* A VF directory's name (a path lookup, not a placement decision: see
 * STORE_READ_MEMORY); a name that is no VF address is simply absent. */
int lookup_vf(struct vffs *fs, const char *vf, struct store_vf_info *ret)
{
	return vf_address_valid(vf) ? store_vf_get(fs->store, vf, STORE_READ_MEMORY, ret) : -ENOENT;
}

/* An assignment file's name under a VF's assignments/. */
int lookup_claim(struct vffs *fs, const char *vf, const char *instance_id, struct store_claim *ret)
{
	if (!instance_id_valid(instance_id))
		return -ENOENT;
	return store_claim_get(fs->store, vf, instance_id, STORE_READ_MEMORY, ret);
}

/* Resolve ino into *n, or reply with the error and return false: the one
 * place handlers that start from an inode resolve it. */
bool vnode_get_or_reply(fuse_req_t req, fuse_ino_t ino, struct vnode *n)
{
	int r = vnode_resolve(req_fs(req), ino, n);

	if (r < 0) {
		fuse_reply_err(req, -r);
		return false;
	}
	return true;
}

/* Whether n is a read-only file (a table entry without a write function). */
bool vnode_read_only(const struct vnode *n)
{
	const struct vfile *f = vfile_of(n->kind, n->index);

	return f && !(f->flags & VFILE_DIR) && !f->write;
}
