/* SPDX-License-Identifier: MIT */
/*
 * lend-fds.c - an unprivileged user's descriptors read by root, for
 * budget-lend.sh (docs/security.md): a user opens files of the mount and
 * hands the descriptors over a Unix socket (SCM_RIGHTS) to a root process
 * that reads them, as a setuid program reading its stdin would.
 *
 *   lend-fds take SOCKET   bind SOCKET (mode 0777), print "listening",
 *                          receive descriptors until the peer hangs up,
 *                          read each whole from offset 0, print
 *                          "read OK ENOBUFS OTHER" (counts), then hold
 *                          them until stdin reaches EOF
 *   lend-fds give SOCKET COUNT FILE
 *                          open FILE COUNT times (read-only), send every
 *                          descriptor to SOCKET, close ours, print "gave N"
 *
 * Exits 0, 1 on a failure of its own (message on stderr), 2 on bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define BATCH 200 /* descriptors per message (SCM_MAX_FD is 253) */

static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int socket_address(const char *path, struct sockaddr_un *a)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(a->sun_path)) {
		fprintf(stderr, "lend-fds: socket path too long\n");
		return -1;
	}
	strcpy(a->sun_path, path);
	return 0;
}

/* A whole read from offset 0: 0, or the errno. */
static int read_whole(int fd)
{
	char buf[65536];
	off_t off = 0;

	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf), off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			return 0;
		off += n;
	}
}

static int take(const char *path)
{
	struct sockaddr_un a;
	int ls, c, *fds = NULL;
	size_t n = 0, cap = 0, ok = 0, nobufs = 0, other = 0;

	raise_fd_limit();
	if (socket_address(path, &a) < 0)
		return 1;
	ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || chmod(path, 0777) < 0 ||
	    listen(ls, 1) < 0) {
		perror("lend-fds: listen");
		return 1;
	}
	printf("listening\n");
	fflush(stdout);
	c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0) {
		perror("lend-fds: accept");
		return 1;
	}
	for (;;) {
		char byte;
		union {
			char buf[CMSG_SPACE(BATCH * sizeof(int))];
			struct cmsghdr align;
		} control;
		struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
		struct msghdr msg = { .msg_iov = &iov,
				      .msg_iovlen = 1,
				      .msg_control = control.buf,
				      .msg_controllen = sizeof(control.buf) };
		ssize_t r = recvmsg(c, &msg, MSG_CMSG_CLOEXEC);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			perror("lend-fds: recvmsg");
			return 1;
		}
		if (r == 0)
			break;
		for (struct cmsghdr *h = CMSG_FIRSTHDR(&msg); h; h = CMSG_NXTHDR(&msg, h)) {
			if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			if (n + k > cap) {
				cap = (n + k) * 2;
				fds = realloc(fds, cap * sizeof(*fds));
				if (!fds) {
					perror("lend-fds: realloc");
					return 1;
				}
			}
			memcpy(fds + n, CMSG_DATA(h), k * sizeof(int));
			n += k;
		}
	}
	for (size_t i = 0; i < n; i++) {
		int e = read_whole(fds[i]);
		ok += e == 0;
		nobufs += e == ENOBUFS;
		other += e != 0 && e != ENOBUFS;
	}
	printf("read %zu %zu %zu\n", ok, nobufs, other);
	fflush(stdout);
	while (getchar() != EOF)
		;
	free(fds);
	return 0;
}

static int give(const char *path, long count, const char *file)
{
	struct sockaddr_un a;
	int s, fds[BATCH];
	long given = 0;

	raise_fd_limit();
	if (socket_address(path, &a) < 0)
		return 1;
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("lend-fds: connect");
		return 1;
	}
	while (given < count) {
		int k = 0;
		for (; k < BATCH && given + k < count; k++) {
			fds[k] = open(file, O_RDONLY | O_CLOEXEC);
			if (fds[k] < 0) {
				perror("lend-fds: open");
				return 1;
			}
		}
		union {
			char buf[CMSG_SPACE(BATCH * sizeof(int))];
			struct cmsghdr align;
		} control;
		char byte = 'x';
		struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
		struct msghdr msg = { .msg_iov = &iov,
				      .msg_iovlen = 1,
				      .msg_control = control.buf,
				      .msg_controllen = CMSG_SPACE((size_t)k * sizeof(int)) };
		struct cmsghdr *h = CMSG_FIRSTHDR(&msg);

		memset(control.buf, 0, sizeof(control.buf));
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN((size_t)k * sizeof(int));
		memcpy(CMSG_DATA(h), fds, (size_t)k * sizeof(int));
		if (sendmsg(s, &msg, 0) != 1) {
			perror("lend-fds: sendmsg");
			return 1;
		}
		for (int i = 0; i < k; i++)
			close(fds[i]);
		given += k;
	}
	close(s);
	printf("gave %ld\n", given);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "take") == 0)
		return take(argv[2]);
	if (argc == 5 && strcmp(argv[1], "give") == 0)
		return give(argv[2], strtol(argv[3], NULL, 10), argv[4]);
	fprintf(stderr, "usage: lend-fds take SOCKET | lend-fds give SOCKET COUNT FILE\n");
	return 2;
}
