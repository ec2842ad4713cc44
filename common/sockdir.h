/* SPDX-License-Identifier: MIT */
/*
 * sockdir.h - the socket directories: where the socket paths of a claim
 * (agent=unix:PATH, agent=hvsock:PATH:PORT, control=PATH) may point, so that
 * a member of the writers' group cannot steer root's sentinel at a socket or
 * a path of its choice (the confused deputy, docs/security.md).  The one
 * rule for both sides of the mount: vfhealthd refuses a claim write that
 * names a path outside the directories (EACCES, fs/claims.c), the sentinel
 * skips such a claim and reaches every socket through sockdirs_open().
 *
 * Lexical rule (pure, sockdirs_find): PATH is absolute and normalized (no
 * empty, "." or ".." component, no trailing '/') and is DIR/NAME[/NAME...]
 * for one of the directories DIR: at least one component below DIR.
 *
 * Resolution rule (I/O, sockdirs_open): DIR is the operator's and is
 * resolved as given (it may be a symlink, as /var/run is); every component
 * below it is resolved without following a symlink and without leaving DIR:
 * openat2(RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
 * from DIR's descriptor, or, on a kernel without openat2, one O_NOFOLLOW
 * open per component.  The result is an O_PATH descriptor of the object
 * itself (the last component included), so a caller that connects through
 * /proc/self/fd/N (sockdirs_sockaddr) reaches exactly the inode checked: a
 * path swapped for a symlink after the check is never followed.
 *
 * Tests: tests/common/test-sockdir.c (both rules, the fallback walk),
 * tests/adversarial/hostile-writes.sh (EACCES at write time),
 * tests/adversarial/sentinel-hostile.sh (the sentinel never connects out).
 */
#ifndef VFHEALTH_SOCKDIR_H
#define VFHEALTH_SOCKDIR_H

#include <sys/socket.h>
#include <sys/un.h>

/* --socket-dir may be given this many times. */
#define SOCKDIRS_MAX 16
/* A socket path fits sun_path with its NUL; so must a directory holding one. */
#define SOCKDIR_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

/* The defaults (vfhealthd(8) says why each): the runtime directories of the
 * usual VMM managers, and /run/vfhealth-vmm for one of your own.  Never /run
 * or /var/run as a whole: they hold root's service sockets (systemd, D-Bus,
 * containerd), the very targets of a confused deputy. */
#define SOCKDIRS_DEFAULT                                                   \
	"/run/vfhealth-vmm", "/run/libvirt/qemu", "/var/lib/libvirt/qemu", \
		"/run/cloud-hypervisor", "/run/firecracker", "/srv/jailer", "/run/vc"

struct sockdirs {
	unsigned count;
	char dir[SOCKDIRS_MAX][SOCKDIR_PATH_MAX + 1];
};

/* *d = the defaults. */
void sockdirs_init_default(struct sockdirs *d);

/* Add dir: absolute, normalized (one trailing '/' is dropped), not "/".
 * -EINVAL for anything else, -ENAMETOOLONG when longer than
 * SOCKDIR_PATH_MAX, -E2BIG past SOCKDIRS_MAX.  A repeat is a no-op. */
int sockdirs_add(struct sockdirs *d, const char *dir);

/* The lexical rule: the index of the first directory holding path, or
 * -EACCES (outside all of them, relative, or not normalized). */
int sockdirs_find(const struct sockdirs *d, const char *path);

/* The resolution rule: an O_PATH|O_CLOEXEC descriptor of path, or
 *   -EACCES   outside the directories, a symlink below one, an escape
 *   -ENOENT   a component (DIR included) does not exist
 *   -ENOTDIR  a component below DIR is not a directory
 *   other -errno (EMFILE, EIO, ...) */
int sockdirs_open(const struct sockdirs *d, const char *path);

/* The write-time check: 0 when path is inside the directories and nothing
 * that exists along it below DIR is a symlink (parts that do not exist yet
 * are fine: a VMM binds its sockets after it claims; the sentinel checks
 * again before each use); -EACCES when not; other -errno when it cannot
 * tell (fail closed). */
int sockdirs_check(const struct sockdirs *d, const char *path);

/* The claim rule, the one both programs apply to a claim's socket paths:
 * control (NULL or "": none) and agent (NULL: none, or an endpoint parsed
 * by endpoint_parse; a vsock endpoint names no path) must each pass
 * sockdirs_check(), control first.  0 when they do; else -EACCES (or the
 * -errno of a check that could not tell: fail closed) with *ret_key
 * ("control" or "agent") and *ret_path (the refused path) for the log. */
struct endpoint;
int sockdirs_check_claim(const struct sockdirs *d, const char *control,
			 const struct endpoint *agent, const char **ret_key, const char **ret_path);

/* For a connect(2) to the Unix socket behind fd (from sockdirs_open):
 * "/proc/self/fd/N", which the kernel resolves to that very inode.  Fills
 * *sun and returns its length. */
socklen_t sockdirs_sockaddr(int fd, struct sockaddr_un *sun);

/* The fallback walk of sockdirs_open (no openat2): relpath below dirfd, one
 * O_NOFOLLOW open per component.  Exposed for its unit test. */
int sockdirs_open_walk(int dirfd, const char *relpath);

#endif
