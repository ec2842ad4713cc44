/* SPDX-License-Identifier: MIT */
/* liveness.c - the evidence about a claim's VMM: /proc and the kernel's
 * socket diagnostics (liveness.h). */
#include "sentinel/liveness.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/procfs.h"

/* TCP_LISTEN, the state the socket diagnostics give a listening socket of
 * any family (include/net/tcp_states.h, not exported to userspace). */
#define SOCK_STATE_LISTEN 10
#define DUMP_BUFSZ 32768
#define LISTENERS_MAX (1u << 22) /* far above any host's; a runaway dump stops here */
#define NETNS_MAX 4096           /* namespaces read per pass; the rest are uncertain */
#define OWN_NETNS (-EEXIST)      /* liveness_gather: the VMM's namespace is ours, unopened */

uint64_t kernel_dev_to_user(uint32_t kdev)
{
	return makedev(kdev >> 20, kdev & 0xfffffu);
}

static int bound_file_cmp(const void *a_, const void *b_)
{
	const struct bound_file *a = a_, *b = b_;

	if (a->dev != b->dev)
		return a->dev < b->dev ? -1 : 1;
	return a->ino < b->ino ? -1 : a->ino > b->ino;
}

void unix_listeners_free(struct unix_listeners *l)
{
	free(l->files);
	*l = (struct unix_listeners){ 0 };
}

bool unix_listeners_has(const struct unix_listeners *l, dev_t dev, ino_t ino)
{
	struct bound_file key = { .dev = dev, .ino = (uint32_t)ino };

	return l->count > 0 &&
	       bsearch(&key, l->files, l->count, sizeof(key), bound_file_cmp) != NULL;
}

static int listeners_push(struct unix_listeners *l, size_t *capacity, struct bound_file f)
{
	if (l->count == *capacity) {
		size_t next = *capacity ? *capacity * 2 : 64;
		struct bound_file *files;

		if (l->count >= LISTENERS_MAX)
			return -E2BIG;
		files = reallocarray(l->files, next, sizeof(*files));
		if (!files)
			return -ENOMEM;
		l->files = files;
		*capacity = next;
	}
	l->files[l->count++] = f;
	return 0;
}

/* One message of the dump: a listening socket and, when it is bound to a
 * file, that file. */
static int parse_unix_diag(const struct nlmsghdr *h, struct unix_listeners *l, size_t *capacity)
{
	const struct unix_diag_msg *m = NLMSG_DATA(h);
	size_t len;

	if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
		return -EBADMSG;
	if (m->udiag_family != AF_UNIX || m->udiag_state != SOCK_STATE_LISTEN)
		return 0;
	len = h->nlmsg_len - NLMSG_LENGTH(sizeof(*m));
	for (size_t off = 0; len - off >= NLA_HDRLEN;) {
		const char *at = (const char *)m + NLMSG_ALIGN(sizeof(*m)) + off;
		struct nlattr a;
		struct unix_diag_vfs vfs;

		memcpy(&a, at, sizeof(a));
		if (a.nla_len < NLA_HDRLEN || a.nla_len > len - off)
			return -EBADMSG;
		off += MIN((size_t)NLA_ALIGN(a.nla_len), len - off);
		if ((a.nla_type & NLA_TYPE_MASK) != UNIX_DIAG_VFS)
			continue;
		if (a.nla_len < NLA_HDRLEN + sizeof(vfs))
			return -EBADMSG;
		memcpy(&vfs, at + NLA_HDRLEN, sizeof(vfs));
		return listeners_push(l, capacity,
				      (struct bound_file){
					      .dev = kernel_dev_to_user(vfs.udiag_vfs_dev),
					      .ino = vfs.udiag_vfs_ino });
	}
	return 0; /* abstract or unbound: no file, never a match */
}

/* Dump the listening Unix sockets of fd's namespace. */
static int dump_listeners(int fd, struct unix_listeners *ret)
{
	struct {
		struct nlmsghdr nlh;
		struct unix_diag_req req;
	} request = {
		.nlh = {
			.nlmsg_len = sizeof(request),
			.nlmsg_type = SOCK_DIAG_BY_FAMILY,
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
			.nlmsg_seq = 1,
		},
		.req = {
			.sdiag_family = AF_UNIX,
			.udiag_states = 1u << SOCK_STATE_LISTEN,
			.udiag_show = UDIAG_SHOW_VFS,
		},
	};
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	_cleanup_free_ char *buf = malloc(DUMP_BUFSZ);
	struct unix_listeners l = { 0 };
	size_t capacity = 0;
	int r = 0;

	if (!buf)
		return -ENOMEM;
	if (sendto(fd, &request, sizeof(request), 0, (struct sockaddr *)&kernel, sizeof(kernel)) <
	    0)
		return negative_errno();
	for (bool done = false; !done && r == 0;) {
		struct sockaddr_nl from;
		socklen_t from_len = sizeof(from);
		ssize_t n = recvfrom(fd, buf, DUMP_BUFSZ, 0, (struct sockaddr *)&from, &from_len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = negative_errno();
			break;
		}
		if (from.nl_pid != 0)
			continue; /* not the kernel */
		size_t left = (size_t)n;
		for (const struct nlmsghdr *h = (const void *)buf; r == 0 && NLMSG_OK(h, left);
		     h = NLMSG_NEXT(h, left)) {
			if (h->nlmsg_seq != request.nlh.nlmsg_seq)
				continue;
			if (h->nlmsg_type == NLMSG_DONE) {
				done = true;
				break;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);
				r = h->nlmsg_len >= NLMSG_LENGTH(sizeof(*e)) && e->error < 0 ?
					    e->error :
					    -EBADMSG;
				break;
			}
			if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY)
				r = parse_unix_diag(h, &l, &capacity);
		}
	}
	if (r < 0) {
		unix_listeners_free(&l);
		return r;
	}
	if (l.count > 1)
		qsort(l.files, l.count, sizeof(*l.files), bound_file_cmp);
	*ret = l;
	return 0;
}

static int diag_socket(void)
{
	int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);

	return fd < 0 ? negative_errno() : fd;
}

struct netns_socket {
	int netns_fd;
	int ret; /* the socket, or -errno */
};

/* A thread of its own enters the namespace: a socket keeps the namespace it
 * was created in, and the thread (with its namespace) ends at once. */
static void *netns_socket_main(void *userdata)
{
	struct netns_socket *a = userdata;

	if (setns(a->netns_fd, CLONE_NEWNET) < 0)
		a->ret = negative_errno();
	else
		a->ret = diag_socket();
	return NULL;
}

int unix_listeners_read(int netns_fd, struct unix_listeners *ret)
{
	_cleanup_close_ int fd = -1;

	if (netns_fd < 0) {
		fd = diag_socket();
	} else {
		struct netns_socket a = { .netns_fd = netns_fd, .ret = -EIO };
		pthread_t thread;
		int r = -pthread_create(&thread, NULL, netns_socket_main, &a);

		if (r < 0)
			return r;
		pthread_join(thread, NULL);
		fd = a.ret;
	}
	if (fd < 0)
		return fd;
	return dump_listeners(fd, ret);
}

/* ---- a pass ---------------------------------------------------------------------- */

void liveness_pass_begin(struct liveness_pass *p, const char *proc_root)
{
	struct stat st;

	*p = (struct liveness_pass){ .proc_root = proc_root, .own = { .rc = -EAGAIN } };
	p->boot_rc = proc_boot_id(proc_root, p->boot_id);
	/* The sentinel's own namespace, to tell a VMM's from it (always the
	 * kernel's: a fake proc root fakes processes, not namespaces). */
	if (stat("/proc/thread-self/ns/net", &st) == 0) {
		p->own.dev = st.st_dev;
		p->own.ino = st.st_ino;
	}
	p->own_unix_rc = stat("/proc/thread-self/net/unix", &st) < 0 ? negative_errno() : 0;
	if (p->own_unix_rc == 0) {
		p->own_unix_dev = st.st_dev;
		p->own_unix_ino = st.st_ino;
	}
}

void liveness_pass_end(struct liveness_pass *p)
{
	unix_listeners_free(&p->own.listeners);
	for (size_t i = 0; i < p->other_count; i++)
		unix_listeners_free(&p->others[i].listeners);
	free(p->others);
	p->others = NULL;
	p->other_count = 0;
}

/* The table of the namespace netns_fd names (-1: our own), read once per pass. */
static const struct liveness_netns *netns_table(struct liveness_pass *p, int netns_fd)
{
	struct liveness_netns *n;
	struct stat st;

	if (netns_fd >= 0) {
		if (fstat(netns_fd, &st) < 0) {
			static const struct liveness_netns unreadable = { .rc = -EBADF };
			return &unreadable;
		}
		if (st.st_dev == p->own.dev && st.st_ino == p->own.ino)
			netns_fd = -1;
	}
	if (netns_fd < 0) {
		if (p->own.rc == -EAGAIN) {
			p->own.rc = unix_listeners_read(-1, &p->own.listeners);
			p->tables_read++;
		}
		return &p->own;
	}
	for (size_t i = 0; i < p->other_count; i++)
		if (p->others[i].dev == st.st_dev && p->others[i].ino == st.st_ino)
			return &p->others[i];
	if (p->other_count >= NETNS_MAX) {
		static const struct liveness_netns too_many = { .rc = -E2BIG };
		return &too_many;
	}
	n = reallocarray(p->others, p->other_count + 1, sizeof(*n));
	if (!n) {
		static const struct liveness_netns no_memory = { .rc = -ENOMEM };
		return &no_memory;
	}
	p->others = n;
	n = &p->others[p->other_count++];
	*n = (struct liveness_netns){ .dev = st.st_dev, .ino = st.st_ino };
	n->rc = unix_listeners_read(netns_fd, &n->listeners);
	p->tables_read++;
	return n;
}

/* Open PROC_ROOT/PID/ns/net: -errno, or the descriptor. */
static int open_netns(const char *proc_root, int64_t pid)
{
	char path[PATH_MAX];
	int fd, r = snprintf(path, sizeof(path), "%s/%" PRId64 "/ns/net", proc_root, pid);

	if (r < 0 || (size_t)r >= sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	return fd < 0 ? negative_errno() : fd;
}

/* Whether the process pid, whose namespace cannot be opened (another
 * user's, and no CAP_SYS_PTRACE), is in the sentinel's own network
 * namespace.  procfs gives each namespace's net/unix an inode number of its
 * own, and PID/net/ is readable whoever runs pid, so equal numbers on the
 * same proc mount are the same namespace: a kernel fact, no name compared. */
static bool in_own_netns(const struct liveness_pass *p, int64_t pid)
{
	char path[PATH_MAX];
	struct stat st;
	int r;

	if (p->own_unix_rc < 0)
		return false;
	r = snprintf(path, sizeof(path), "%s/%" PRId64 "/net/unix", p->proc_root, pid);
	if (r < 0 || (size_t)r >= sizeof(path) || stat(path, &st) < 0)
		return false;
	return st.st_dev == p->own_unix_dev && st.st_ino == p->own_unix_ino;
}

void liveness_gather(struct liveness_pass *p, const struct assignment *c,
		     struct liveness_evidence *ev)
{
	_cleanup_close_ int netns_fd = -1;
	struct proc_stat ps = { 0 };
	struct stat st;

	*ev = (struct liveness_evidence){
		.pid = c->pid,
		.starttime_claimed = c->pid_starttime,
		.boot_id_given = c->boot_id[0] != '\0',
		.control_given = c->control[0] != '\0',
	};
	if (ev->boot_id_given) {
		ev->boot_rc = p->boot_rc;
		ev->boot_id_same = p->boot_rc == 0 && strcmp(p->boot_id, c->boot_id) == 0;
	}
	if (ev->pid > 0) {
		/* The namespace first, then the process: if the stat read below
		 * shows the recorded start time, the process was alive, and so
		 * the same one, when its namespace was opened (or found to be
		 * ours). */
		netns_fd = open_netns(p->proc_root, ev->pid);
		if ((netns_fd == -EACCES || netns_fd == -EPERM) && in_own_netns(p, ev->pid))
			netns_fd = OWN_NETNS;
		ev->proc_rc = proc_pid_stat(p->proc_root, ev->pid, &ps);
		ev->ended = ev->proc_rc == 0 && proc_state_ended(ps.state);
		ev->starttime_now = ps.starttime;
	}
	if (!ev->control_given)
		return;
	if (ev->pid > 0 &&
	    (ev->proc_rc < 0 || ev->ended ||
	     (ev->starttime_claimed != 0 && ev->starttime_now != ev->starttime_claimed))) {
		/* Not this VMM's namespace (gone, unreadable or another
		 * process): the pid alone decides. */
		ev->sockets_rc = ev->proc_rc < 0 ? ev->proc_rc : -ESRCH;
		return;
	}
	if (ev->pid > 0 && netns_fd < 0 && netns_fd != OWN_NETNS) {
		ev->sockets_rc = netns_fd;
		return;
	}
	/* The file the control path names now: gone or not a socket, nothing
	 * can listen on it.  A symlink is not followed (the socket directories
	 * allow none). */
	if (fstatat(AT_FDCWD, c->control, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			ev->sockets_rc = 0; /* listening stays false */
		else
			ev->sockets_rc = negative_errno();
		return;
	}
	if (!S_ISSOCK(st.st_mode))
		return;
	const struct liveness_netns *table = netns_table(p, netns_fd >= 0 ? netns_fd : -1);
	if (table->rc < 0) {
		ev->sockets_rc = table->rc;
		return;
	}
	ev->listening = unix_listeners_has(&table->listeners, st.st_dev, st.st_ino);
}
