/* SPDX-License-Identifier: MIT */
/*
 * faultvfs.c - fault-injecting SQLite VFS shim (contract: faultvfs.h).
 *
 * Design notes: SQLite calls the VFS from whatever thread runs a statement.
 * The fault switches are atomics read on every call.  Blocked syncs wait on
 * block_cond under block_lock; faultvfs_block_syncs(false) broadcasts, and
 * the waiters re-check the switch, so releasing never races with blocking.
 * Nothing here is ever torn down: the VFS stays registered for the process.
 */
#include "faultvfs.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

struct fault_file {
	sqlite3_file base;  /* pMethods = &fault_io_methods */
	sqlite3_file *real; /* the wrapped file, right after this struct */
};

static sqlite3_vfs *real_vfs;
static sqlite3_vfs fault_vfs;
static atomic_int fail_write_rc;
static atomic_int fail_sync_rc;
static atomic_bool block_syncs;
static atomic_ulong sync_count;
static pthread_mutex_t block_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t block_cond = PTHREAD_COND_INITIALIZER;
static unsigned blocked;

#define REAL(f) (((struct fault_file *)(f))->real)

static int ff_close(sqlite3_file *f)
{
	return REAL(f)->pMethods->xClose(REAL(f));
}

static int ff_read(sqlite3_file *f, void *buf, int amt, sqlite3_int64 off)
{
	return REAL(f)->pMethods->xRead(REAL(f), buf, amt, off);
}

static int ff_write(sqlite3_file *f, const void *buf, int amt, sqlite3_int64 off)
{
	int rc = atomic_load(&fail_write_rc);

	if (rc != SQLITE_OK)
		return rc;
	return REAL(f)->pMethods->xWrite(REAL(f), buf, amt, off);
}

static int ff_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	return REAL(f)->pMethods->xTruncate(REAL(f), size);
}

static int ff_sync(sqlite3_file *f, int flags)
{
	pthread_mutex_lock(&block_lock);
	if (atomic_load(&block_syncs)) {
		blocked++;
		pthread_cond_broadcast(&block_cond);
		while (atomic_load(&block_syncs))
			pthread_cond_wait(&block_cond, &block_lock);
		blocked--;
	}
	pthread_mutex_unlock(&block_lock);

	int rc = atomic_load(&fail_sync_rc);
	if (rc != SQLITE_OK)
		return rc;
	atomic_fetch_add(&sync_count, 1);
	return REAL(f)->pMethods->xSync(REAL(f), flags);
}

static int ff_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
	return REAL(f)->pMethods->xFileSize(REAL(f), size);
}

static int ff_lock(sqlite3_file *f, int level)
{
	return REAL(f)->pMethods->xLock(REAL(f), level);
}

static int ff_unlock(sqlite3_file *f, int level)
{
	return REAL(f)->pMethods->xUnlock(REAL(f), level);
}

static int ff_check_reserved_lock(sqlite3_file *f, int *out)
{
	return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}

static int ff_file_control(sqlite3_file *f, int op, void *arg)
{
	return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}

static int ff_sector_size(sqlite3_file *f)
{
	return REAL(f)->pMethods->xSectorSize(REAL(f));
}

static int ff_device_characteristics(sqlite3_file *f)
{
	return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}

static int ff_shm_map(sqlite3_file *f, int pg, int pgsz, int extend, void volatile **pp)
{
	return REAL(f)->pMethods->xShmMap(REAL(f), pg, pgsz, extend, pp);
}

static int ff_shm_lock(sqlite3_file *f, int offset, int n, int flags)
{
	return REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags);
}

static void ff_shm_barrier(sqlite3_file *f)
{
	REAL(f)->pMethods->xShmBarrier(REAL(f));
}

static int ff_shm_unmap(sqlite3_file *f, int delete_flag)
{
	return REAL(f)->pMethods->xShmUnmap(REAL(f), delete_flag);
}

static int ff_fetch(sqlite3_file *f, sqlite3_int64 off, int amt, void **pp)
{
	*pp = NULL; /* no memory-mapped reads: every page goes through xRead */
	return SQLITE_OK;
}

static int ff_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
	return SQLITE_OK;
}

static const sqlite3_io_methods fault_io_methods = {
	.iVersion = 3,
	.xClose = ff_close,
	.xRead = ff_read,
	.xWrite = ff_write,
	.xTruncate = ff_truncate,
	.xSync = ff_sync,
	.xFileSize = ff_file_size,
	.xLock = ff_lock,
	.xUnlock = ff_unlock,
	.xCheckReservedLock = ff_check_reserved_lock,
	.xFileControl = ff_file_control,
	.xSectorSize = ff_sector_size,
	.xDeviceCharacteristics = ff_device_characteristics,
	.xShmMap = ff_shm_map,
	.xShmLock = ff_shm_lock,
	.xShmBarrier = ff_shm_barrier,
	.xShmUnmap = ff_shm_unmap,
	.xFetch = ff_fetch,
	.xUnfetch = ff_unfetch,
};

static int fv_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out_flags)
{
	struct fault_file *ff = (struct fault_file *)f;

	ff->real = (sqlite3_file *)&ff[1];
	int rc = real_vfs->xOpen(real_vfs, name, ff->real, flags, out_flags);
	ff->base.pMethods = ff->real->pMethods ? &fault_io_methods : NULL;
	return rc;
}

static int fv_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
	return real_vfs->xDelete(real_vfs, name, sync_dir);
}

static int fv_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
	return real_vfs->xAccess(real_vfs, name, flags, out);
}

static int fv_full_pathname(sqlite3_vfs *vfs, const char *name, int n, char *out)
{
	return real_vfs->xFullPathname(real_vfs, name, n, out);
}

int faultvfs_register(void)
{
	static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
	int rc = SQLITE_OK;

	pthread_mutex_lock(&once);
	if (!real_vfs) {
		sqlite3_vfs *def = sqlite3_vfs_find(NULL);
		if (!def) {
			rc = SQLITE_ERROR;
		} else {
			fault_vfs = *def; /* time, randomness, dlopen: as the real one */
			fault_vfs.pNext = NULL;
			fault_vfs.zName = FAULTVFS_NAME;
			fault_vfs.szOsFile = (int)sizeof(struct fault_file) + def->szOsFile;
			fault_vfs.xOpen = fv_open;
			fault_vfs.xDelete = fv_delete;
			fault_vfs.xAccess = fv_access;
			fault_vfs.xFullPathname = fv_full_pathname;
			real_vfs = def;
			rc = sqlite3_vfs_register(&fault_vfs, 0);
		}
	}
	pthread_mutex_unlock(&once);
	return rc;
}

void faultvfs_fail_writes(int sqlite_rc)
{
	atomic_store(&fail_write_rc, sqlite_rc);
}

void faultvfs_fail_syncs(int sqlite_rc)
{
	atomic_store(&fail_sync_rc, sqlite_rc);
}

void faultvfs_block_syncs(bool block)
{
	pthread_mutex_lock(&block_lock);
	atomic_store(&block_syncs, block);
	pthread_cond_broadcast(&block_cond);
	pthread_mutex_unlock(&block_lock);
}

bool faultvfs_wait_blocked(unsigned n, int timeout_ms)
{
	struct timespec deadline;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += timeout_ms / 1000;
	deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&block_lock);
	while (blocked < n && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&block_cond, &block_lock, &deadline);
	bool reached = blocked >= n;
	pthread_mutex_unlock(&block_lock);
	return reached;
}

unsigned long faultvfs_syncs(void)
{
	return atomic_load(&sync_count);
}
