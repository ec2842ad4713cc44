/* SPDX-License-Identifier: MIT */
/*
 * vffs.c - the FUSE low-level filesystem over the health store (vffs.h,
 * vfhealth(5)): the lowlevel ops table, lookup and attributes, the claim
 * entries (create, mknod, unlink), mkdir and rmdir, and the life cycle
 * (new, mount, start, stop, free).  What the other files of fs/ own:
 * vffs-internal.h.
 *
 * Threads.
 *  - FUSE workers: the loop (loop.c) runs on its own "loop" thread, which
 *    reads every request and serves those that never wait itself, and
 *    hands the others to workers it starts.  Every handler replies exactly
 *    once, touches only the store and the filesystem's
 *    in-memory state, and never waits on the network, a guest or the
 *    notifier.
 *  - the notifier (notify.h): sends every kernel notification; its helper
 *    process writes through the mount, so those opens and writes arrive
 *    here, are recognized by the helper's pid (fuse_req_ctx()->pid) and
 *    change nothing.
 *  - the caller's main thread waits for signals (vffs.h).
 *
 * Locks: row 1 of the lock table in docs/architecture.md (the one
 * statement of the order).  The reader budget (budget.h, row 10) is a leaf.
 *
 * Caching.  Attributes are cached long (ATTR_TIMEOUT_S; claims' too: an
 * inode's attributes never change), so default_permissions costs no
 * GETATTR, and listings are readdirplus, so a listing brings every entry's
 * attributes.  A read-only open of a file whose every rendering has the
 * same length is keep_cache: reads are served from the page cache.  Every
 * other open is direct_io, so every read reaches us (handle.c; a
 * page-cached length-varying file would tear).  What the kernel caches is
 * made stale only by store changes, which the notifier invalidates under
 * the ordering rule of docs/architecture.md (notify.h).  The listings of
 * the root and of a VF directory are cached too (cache_readdir): their
 * entries change only by mkdir and rmdir through the mount, for which the
 * kernel drops the listing itself, and when the store is first loaded, for
 * which the notifier invalidates the root.  assignments/ is listed afresh
 * every time: a claim ends by a write (release=) as well.  Directory
 * operations (mkdir, rmdir, claims) answer at once: nothing page-cached
 * depends on them, their entries are the kernel's own to update, and
 * claims' entries are never cached.
 *
 * Claims (vfhealth(5)): claims.h.  create on assignments/ makes a
 * reservation in the store and answers EBUSY/EEXIST at once; what is written
 * through an open claim file is staged in its handle and committed at FLUSH
 * (close(2) returns the refusal), a bare claim at RELEASE.  A reservation is
 * visible by name from its create on.  Entries of claims are not cached
 * (timeout 0): a claim's name can vanish without an unlink the kernel sees
 * (release=, a cancelled reservation).
 *
 * Shutdown (vffs_stop): stop the notifier while the mount still serves,
 * then fuse_session_exit() and wake the thread waiting for a request
 * (loop_interrupt()), then unmount, which also aborts anything still in
 * flight, then detach from the store (the caller closes it); see
 * docs/architecture.md, "Stopping a thread".
 */
#include "common/parse.h"
#include "fs/vffs-internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	/* Content is generated: the kernel caches pages only of fixed-size files
	 * opened keep_cache, and attributes, and never writes back; both are
	 * invalidated by the notifier (the ordering rule,
	 * docs/architecture.md).  No automatic invalidation (it would trust
	 * mtimes); readdirplus always (a listing brings the attributes); no
	 * atomic O_TRUNC (the kernel would set a cached file's size to 0 at
	 * a writer's open: a SETATTR, answered with the real size, instead). */
	conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_AUTO_INVAL_DATA |
				  FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_ATOMIC_O_TRUNC);
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct vffs *fs = req_fs(req);
	struct vnode p = { 0 };
	struct vnode child = { 0 };
	fuse_ino_t ino;
	int r, i;

	r = vnode_resolve(fs, parent, &p);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	switch (p.kind) {
	case VN_ROOT:
		i = vfile_find(top_files, TOP_FILE_COUNT, name);
		if (i >= 0) {
			child.kind = VN_TOP;
			child.index = i;
			ino = INO_TOP_BASE + (fuse_ino_t)i;
			break;
		}
		r = lookup_vf(fs, name, &child.vf);
		if (r < 0) {
			fuse_reply_err(req, -r);
			return;
		}
		child.kind = VN_VF_DIR;
		ino = ino_vf(child.vf.id, VF_SLOT_DIR);
		break;
	case VN_TOP:
		if (p.index != TOP_GPUS) {
			fuse_reply_err(req, ENOTDIR);
			return;
		}
		r = lookup_gpu(fs, name);
		if (r < 0) {
			fuse_reply_err(req, -r);
			return;
		}
		child.kind = VN_GPU_DIR;
		snprintf(child.gpu, sizeof(child.gpu), "%s", name);
		ino = ino_gpu(name, 0);
		break;
	case VN_GPU_DIR:
		i = vfile_find(gpu_files, GPU_FILE_COUNT, name);
		if (i < 0) {
			fuse_reply_err(req, ENOENT);
			return;
		}
		child.kind = VN_GPU_ENTRY;
		child.index = i;
		memcpy(child.gpu, p.gpu, sizeof(child.gpu));
		ino = ino_gpu(p.gpu, 1 + i);
		break;
	case VN_VF_DIR:
		i = vfile_find(vf_files, VF_FILE_COUNT, name);
		if (i < 0) {
			fuse_reply_err(req, ENOENT);
			return;
		}
		child.kind = VN_VF_ENTRY;
		child.index = i;
		child.vf = p.vf;
		ino = ino_vf(p.vf.id, 1 + i);
		break;
	case VN_VF_ENTRY:
		if (!vnode_is_claim_dir(&p)) {
			fuse_reply_err(req, ENOTDIR);
			return;
		}
		r = lookup_claim(fs, p.vf.vf, name, &child.claim);
		if (r < 0) {
			fuse_reply_err(req, -r);
			return;
		}
		child.kind = VN_CLAIM;
		child.vf.id = p.vf.id;
		ino = ino_claim(p.vf.id, child.claim.id);
		break;
	default:
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	reply_entry(req, ino, &child);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fuse_reply_none(req); /* inodes are computed; nothing to drop */
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct vffs *fs = req_fs(req);
	struct vnode n = { 0 };
	struct stat st;
	int r = vnode_resolve(fs, ino, &n);

	/* A claim released through an open file is still that open file (its
	 * outcome is read through it: claims.h), which fstat(2) (a shell's
	 * cat) must find: an unlinked file.  No name leads to it. */
	if (r == -ENOENT && ino >> INO_KIND_SHIFT == INO_KIND_CLAIM) {
		n.kind = VN_CLAIM;
		vnode_stat(fs, ino, &n, &st);
		st.st_nlink = 0;
		fuse_reply_attr(req, &st, 0);
		return;
	}
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	vnode_stat(fs, ino, &n, &st);
	fuse_reply_attr(req, &st, attr_timeout(&n));
}

/* Ownership and modes are fixed (EPERM).  On a writable file truncation is
 * accepted and ignored so that `echo X > file` (O_TRUNC) works, and times
 * are not settable but `touch` must not fail; a read-only file refuses both
 * with EACCES, even for root, as it refuses opening for writing. */
static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct vffs *fs = req_fs(req);
	struct vnode n;
	struct stat st;

	if (!vnode_get_or_reply(req, ino, &n))
		return;
	if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (to_set && vnode_read_only(&n)) {
		fuse_reply_err(req, EACCES);
		return;
	}
	vnode_stat(fs, ino, &n, &st);
	if ((to_set & FUSE_SET_ATTR_SIZE) && S_ISDIR(st.st_mode)) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	fuse_reply_attr(req, &st, 0);
}

/* Claim <vf>/assignments/<name>, or only reserve it (create: see
 * claims.h).  Only assignments/ takes new files. */
static int make_claim(struct vffs *fs, fuse_ino_t parent, const char *name, bool reserve,
		      struct vnode *child)
{
	struct vnode p = { 0 };
	int r;

	r = vnode_resolve(fs, parent, &p);
	if (r < 0)
		return r;
	if (!vnode_is_claim_dir(&p))
		return -EACCES;
	r = claims_make(&fs->claims, &p.vf, name, reserve, &child->claim);
	if (r < 0)
		return r;
	memset(child, 0, offsetof(struct vnode, claim));
	child->kind = VN_CLAIM;
	child->vf.id = p.vf.id;
	return 0;
}

/* make_claim() for a create or a mknod; a refusal is answered here (and a
 * name the grammar refuses logged with its rule). */
static bool make_claim_or_reply(fuse_req_t req, fuse_ino_t parent, const char *name, bool reserve,
				struct vnode *child)
{
	int r = make_claim(req_fs(req), parent, name, reserve, child);

	if (r == -EINVAL && !instance_id_valid(name))
		log_refused(req, "claim", name, INSTANCE_ID_RULE);
	if (r < 0)
		fuse_reply_err(req, -r);
	return r == 0;
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct vffs *fs = req_fs(req);
	struct vnode child = { 0 };
	struct fuse_entry_param e;
	struct vhandle *h;

	if (!make_claim_or_reply(req, parent, name, true, &child))
		return;
	h = handle_new(fs, &child, true, fuse_req_ctx(req));
	if (!h) {
		/* The caller sees a failure: do not leave the reservation behind. */
		store_claim_cancel(fs->store, child.claim.a.vf, child.claim.id);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = ino_claim(child.vf.id, child.claim.id);
	e.generation = GENERATION;
	e.entry_timeout = 0; /* a cancelled reservation must leave no dentry */
	vnode_stat(fs, e.ino, &child, &e.attr);
	fi->fh = (uintptr_t)h;
	fi->direct_io = 1;
	if (fuse_reply_create(req, &e, fi) < 0) {
		store_claim_cancel(fs->store, child.claim.a.vf, child.claim.id);
		handle_free(fs, h);
	}
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct vnode child = { 0 };

	if (!S_ISREG(mode)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (!make_claim_or_reply(req, parent, name, false, &child))
		return;
	log_accepted(req, LOG_INFO, "claim", name, NULL);
	reply_entry(req, ino_claim(child.vf.id, child.claim.id), &child);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct vffs *fs = req_fs(req);
	struct vnode p = { 0 };
	int r;

	r = vnode_resolve(fs, parent, &p);
	if (r == 0 && !vnode_is_claim_dir(&p))
		r = -EPERM; /* only claims can be removed */
	if (r == 0)         /* never a running VM's: claims.h */
		r = claims_unlink(&fs->claims, p.vf.vf, name, fuse_req_ctx(req)->uid,
				  fuse_req_ctx(req)->pid);
	fuse_reply_err(req, -r);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct vffs *fs = req_fs(req);
	struct vnode child = { 0 };
	int r;

	if (parent != INO_ROOT) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (vfile_find(top_files, TOP_FILE_COUNT, name) >= 0) {
		fuse_reply_err(req, EEXIST);
		return;
	}
	/* The parent GPU, when sysfs knows it; else VF/parent is written later. */
	char gpu[VF_ADDR_BUFSZ];
	r = physfn_read(fs->sysfs_root, name, gpu);
	if (r < 0 && r != -ENOENT && vf_address_valid(name))
		log_warn("%s: parent GPU unknown: %s/bus/pci/devices/%s/physfn: %s", name,
			 fs->sysfs_root, name, strerror(-r));
	r = store_vf_register(fs->store, name, gpu);
	if (r == 0)
		r = store_vf_get(fs->store, name, STORE_READ_MEMORY, &child.vf);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	if (gpu[0])
		log_info("%s: registered (parent GPU %s)", name, gpu);
	else
		log_info("%s: registered", name);
	child.kind = VN_VF_DIR;
	reply_entry(req, ino_vf(child.vf.id, VF_SLOT_DIR), &child);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct vffs *fs = req_fs(req);
	int r;

	if (parent != INO_ROOT) {
		fuse_reply_err(req, EPERM); /* assignments/ belongs to its VF */
		return;
	}
	struct store_vf_info gone;
	bool known = lookup_vf(fs, name, &gone) == 0;

	r = store_vf_unregister(fs->store, name);
	if (r == 0 && known) {
		/* A descriptor held open on its files keeps their inodes, which
		 * the notifier no longer finds by name: drop their pages and
		 * attributes by number (never from this worker, see notify.h). */
		for (int i = 0; i < VF_FILE_COUNT; i++)
			if (vfile_page_cached(&vf_files[i]))
				notifier_invalidate_inode(fs->notifier, ino_vf(gone.id, 1 + i));
	}
	if (r == 0)
		log_info("%s: unregistered", name);
	else if (r == -EBUSY)
		log_warn("%s: not unregistered: quarantined, tallied or claimed", name);
	fuse_reply_err(req, -r);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	fuse_reply_err(req, EPERM);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	fuse_reply_err(req, EPERM);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, EPERM);
}

static const struct fuse_lowlevel_ops vffs_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release_file,
	.poll = op_poll,
	.create = op_create,
	.mknod = op_mknod,
	.unlink = op_unlink,
	.mkdir = op_mkdir,
	.rmdir = op_rmdir,
	.rename = op_rename,
	.link = op_link,
	.symlink = op_symlink,
};

const char *vffs_mountpoint(const struct vffs *fs)
{
	return fs->mountpoint;
}

int vffs_new(const struct vffs_options *opt, struct vffs **ret)
{
	_cleanup_free_ char *mount_opts = NULL;
	struct vffs *fs;
	int r = -ENOMEM;

	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	pthread_mutex_init(&fs->open_lock, NULL);
	if (budget_new(READER_BUDGET_TOTAL, READER_BUDGET_PER_UID, &fs->budget) < 0)
		goto fail;
	clock_gettime(CLOCK_REALTIME, &fs->start_time);
	fs->group = opt->group;
	fs->metrics = opt->metrics;
	fs->max_workers = opt->max_workers ? MIN(opt->max_workers, (unsigned)VFFS_MAX_WORKERS_MAX) :
					     VFFS_MAX_WORKERS_DEFAULT;
	fs->recovery = opt->recovery;
	fs->claims.socket_dirs = &fs->socket_dirs;
	if (opt->socket_dirs)
		fs->socket_dirs = *opt->socket_dirs;
	else
		sockdirs_init_default(&fs->socket_dirs);
	fs->mountpoint = path_absolute(opt->mountpoint ? opt->mountpoint : VFFS_DEFAULT_MOUNTPOINT);
	fs->sysfs_root = strdup(opt->sysfs_root ? opt->sysfs_root : PHYSFN_DEFAULT_SYSFS_ROOT);
	if (!fs->mountpoint || !fs->sysfs_root)
		goto fail;
	if (asprintf(&mount_opts,
		     "allow_other,default_permissions,fsname=vfhealth,subtype=vfhealth%s%s",
		     opt->fuse_options ? "," : "",
		     opt->fuse_options ? opt->fuse_options : "") < 0) {
		mount_opts = NULL;
		goto fail;
	}
	if (fuse_opt_add_arg(&fs->args, "vfhealthd") || fuse_opt_add_arg(&fs->args, "-o") ||
	    fuse_opt_add_arg(&fs->args, mount_opts) ||
	    (opt->debug && fuse_opt_add_arg(&fs->args, "-d")))
		goto fail;
	fs->se = fuse_session_new(&fs->args, &vffs_ops, sizeof(vffs_ops), fs);
	if (!fs->se) {
		log_err("invalid FUSE options: %s", mount_opts);
		r = -EINVAL;
		goto fail;
	}
	*ret = fs;
	return 0;

fail:
	vffs_free(fs);
	return r;
}

int vffs_mount(struct vffs *fs)
{
	int r;

	r = clear_mountpoint(fs);
	if (r < 0)
		return r;
	r = mkdir_p(fs->mountpoint, 0755);
	if (r < 0) {
		log_err("cannot create mountpoint %s: %s", fs->mountpoint, strerror(-r));
		return r;
	}
	if (fuse_session_mount(fs->se, fs->mountpoint) != 0) {
		/* libfuse said what failed (often "failed to open /dev/fuse:
		 * Permission denied"); say what to do about the usual cause. */
		if (!can_mount())
			log_err("cannot mount on %s: run vfhealthd as root (mounting needs "
				"CAP_SYS_ADMIN and access to /dev/fuse)",
				fs->mountpoint);
		else
			log_err("cannot mount on %s", fs->mountpoint);
		return -EIO;
	}
	fs->mounted = true;
	log_info("mounted on %s", fs->mountpoint);
	return 0;
}

static void *loop_main(void *arg)
{
	struct vffs *fs = arg;
	int r = loop_run(fs->loop);

	if (!atomic_load(&fs->stopping)) {
		/* Unmounted from outside (fusermount -u): end the daemon too; the
		 * caller asks vffs_unmounted_outside() and logs it. */
		log_debug("the FUSE session ended on its own (%d)", r);
		atomic_store(&fs->unmounted_outside, true);
		kill(getpid(), SIGTERM);
	}
	return NULL;
}

bool vffs_unmounted_outside(const struct vffs *fs)
{
	return fs && atomic_load(&fs->unmounted_outside);
}

/* The inode of a notified file (notify.h): the scheme atop this file. */
static fuse_ino_t notify_inode(void *userdata, const struct notify_key *key)
{
	switch (key->scope) {
	case NOTIFY_VF:
		/* the id the store's change named: 0 when the VF is gone, whose
		 * inodes resolve to nothing any more */
		return key->vf_id ? ino_vf(key->vf_id, 1 + key->index) : 0;
	case NOTIFY_GPU:
		return ino_gpu(key->addr, 1 + key->index);
	case NOTIFY_TOP:
	default:
		return INO_TOP_BASE + (fuse_ino_t)key->index;
	}
}

void vffs_store_changed(void *userdata, const struct store_change *change)
{
	struct vffs *fs = userdata;

	if (fs->notifier)
		notifier_store_change(fs->notifier, change);
}

int vffs_start(struct vffs *fs, struct store *store)
{
	int r;

	if (!store)
		return -EINVAL;
	fs->store = store;
	fs->claims.store = store;
	r = notifier_new(fs->se, fs->mountpoint, fs->store, &fs->notifier);
	if (r < 0)
		return r;
	notifier_set_inode_fn(fs->notifier, notify_inode, fs);
	r = notifier_start(fs->notifier);
	if (r < 0) {
		log_err("cannot start the notifier: %s", strerror(-r));
		return r;
	}
	r = loop_new(fs, fs->max_workers, &fs->loop);
	if (r < 0) {
		log_err("cannot start the FUSE loop: %s", strerror(-r));
		return r;
	}
	r = pthread_create(&fs->loop_thread, NULL, loop_main, fs);
	if (r) {
		log_err("cannot start the FUSE loop: %s", strerror(r));
		return -r;
	}
	fs->loop_running = true;
	log_info("serving %s", fs->mountpoint);
	return 0;
}

void vffs_stop(struct vffs *fs)
{
	if (!fs)
		return;
	atomic_store(&fs->stopping, true);
	if (fs->notifier)
		notifier_stop(fs->notifier); /* it may be writing through the mount */
	if (fs->loop_running) {
		struct timespec deadline;
		int tries = 0;

		fuse_session_exit(fs->se);
		for (;;) {
			loop_interrupt(fs->loop);
			clock_gettime(CLOCK_REALTIME, &deadline);
			deadline.tv_nsec += 100L * 1000 * 1000;
			if (deadline.tv_nsec >= NSEC_PER_SEC) {
				deadline.tv_sec++;
				deadline.tv_nsec -= NSEC_PER_SEC;
			}
			if (pthread_timedjoin_np(fs->loop_thread, NULL, &deadline) == 0)
				break;
			if (++tries == 50) {
				/* Unmounting aborts the connection, which ends the workers. */
				log_warn("the FUSE loop does not stop; unmounting under it");
				fuse_session_unmount(fs->se);
				fs->mounted = false;
				pthread_join(fs->loop_thread, NULL);
				break;
			}
		}
		fs->loop_running = false;
	}
	loop_free(fs->loop);
	fs->loop = NULL;
	/* no request is served any more, but the store's answerer may still
	 * answer writes queued behind a commit: they need the session */
	handle_wait_deferred(fs);
	if (fs->mounted) {
		fuse_session_unmount(fs->se);
		fs->mounted = false;
		log_info("unmounted %s", fs->mountpoint);
	}
	if (fs->store) {
		fs->store = NULL;
		fs->claims.store = NULL;
	}
}

void vffs_free(struct vffs *fs)
{
	if (!fs)
		return;
	vffs_stop(fs);
	/* No handler runs any more: what the kernel never released is ours. */
	while (fs->open_list)
		fs->open_list->free(fs, fs->open_list);
	pthread_mutex_destroy(&fs->open_lock);
	notifier_free(fs->notifier);
	if (fs->se)
		fuse_session_destroy(fs->se);
	fuse_opt_free_args(&fs->args);
	budget_free(fs->budget);
	free(fs->mountpoint);
	free(fs->sysfs_root);
	free(fs);
}
