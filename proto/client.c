/* SPDX-License-Identifier: MIT */
/* client.c - GetGPUInitStatus from the host side.  Contract in client.h.
 *
 * One non-blocking socket per call and one absolute deadline; every wait is
 * a poll() on the socket and the caller's cancel fd.  No shared state, so
 * any number of threads may call agent_query at once. */
#include "proto/client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#include "common/cleanup.h"
#include "proto/frame.h"
#include "common/parse.h"

/* The VMM's answer to "CONNECT PORT\n" is "OK <number>\n"; anything longer
 * than this is not a VMM we understand. */
#define HVSOCK_REPLY_MAX 64

/* How long to back off when a Unix listener's backlog is full: AF_UNIX
 * connect says EAGAIN there and offers nothing to poll for room. */
#define UNIX_BACKLOG_RETRY_NS (INT64_C(10) * 1000 * 1000)

/* Sleep until min(deadline, now + ns) unless cancel_fd fires first. */
static int backoff(int64_t ns, int64_t deadline_ns, int cancel_fd)
{
	int64_t until = MIN(deadline_ns, monotonic_ns() + ns);
	struct pollfd p = { .fd = cancel_fd, .events = POLLIN };

	for (;;) {
		int64_t left = until - monotonic_ns();
		int k;

		if (left <= 0)
			return 0;
		k = poll(&p, cancel_fd >= 0 ? 1 : 0, (int)((left + 999999) / 1000000));
		if (k < 0 && errno != EINTR)
			return negative_errno();
		if (k > 0)
			return -ECANCELED;
	}
}

static int connect_deadline(int family, const struct sockaddr *sa, socklen_t sa_len,
			    int64_t deadline_ns, int cancel_fd, int *ret_fd)
{
	_cleanup_close_ int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int err = 0, k;
	socklen_t err_len = sizeof(err);

	if (fd < 0)
		return negative_errno();
	for (;;) {
		if (connect(fd, sa, sa_len) == 0)
			break;
		if (errno == EINPROGRESS) {
			k = fd_wait(fd, POLLOUT, deadline_ns, cancel_fd);
			if (k < 0)
				return k;
			if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) < 0)
				return negative_errno();
			if (err)
				return -err;
			break;
		}
		if (errno == EAGAIN && family == AF_UNIX) {
			if (monotonic_ns() >= deadline_ns)
				return -ETIMEDOUT;
			k = backoff(UNIX_BACKLOG_RETRY_NS, deadline_ns, cancel_fd);
			if (k < 0)
				return k;
			continue;
		}
		return negative_errno();
	}
	*ret_fd = move_fd(fd);
	return 0;
}

/* Cloud Hypervisor / Firecracker hybrid vsock: "CONNECT PORT\n" in,
 * "OK ...\n" back; after that the stream is the guest's. */
static int hvsock_handshake(int fd, uint32_t port, int64_t deadline_ns, int cancel_fd)
{
	char request[32], reply[HVSOCK_REPLY_MAX];
	size_t got = 0;
	int n = snprintf(request, sizeof(request), "CONNECT %u\n", port);
	int k = fd_write_all(fd, request, (size_t)n, deadline_ns, cancel_fd);

	if (k < 0)
		return k;
	for (;;) {
		/* One byte at a time: whatever follows the newline is the agent's. */
		ssize_t r = read(fd, reply + got, 1);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return negative_errno();
			k = fd_wait(fd, POLLIN, deadline_ns, cancel_fd);
			if (k < 0)
				return k;
			continue;
		}
		if (r == 0)
			return -ECONNRESET; /* the VMM refused: no listener on that port */
		if (reply[got] == '\n')
			break;
		if (++got >= sizeof(reply) - 1)
			return -EPROTO;
	}
	reply[got] = '\0';
	if (strncmp(reply, "OK", 2) != 0 || (reply[2] != ' ' && reply[2] != '\0'))
		return -EPROTO;
	return 0;
}

/* The address of ep's Unix socket: its path, or with dirs the inode that
 * sockdirs_open() checked, by /proc/self/fd/N (kept open in *path_fd until
 * the connect is done). */
static int unix_address(const struct endpoint *ep, const struct sockdirs *dirs,
			struct sockaddr_un *sun, socklen_t *sun_len, int *path_fd)
{
	size_t len = strnlen(ep->path, sizeof(ep->path));
	struct stat st;

	if (len == 0 || len >= sizeof(sun->sun_path))
		return -EINVAL;
	if (!dirs) {
		*sun = (struct sockaddr_un){ .sun_family = AF_UNIX };
		memcpy(sun->sun_path, ep->path, len);
		*sun_len = sizeof(*sun);
		return 0;
	}
	*path_fd = sockdirs_open(dirs, ep->path);
	if (*path_fd < 0)
		return *path_fd;
	if (fstat(*path_fd, &st) < 0)
		return negative_errno();
	if (!S_ISSOCK(st.st_mode))
		return -ENOTSOCK;
	*sun_len = sockdirs_sockaddr(*path_fd, sun);
	return 0;
}

static int connect_endpoint(const struct endpoint *ep, const struct sockdirs *dirs,
			    int64_t deadline_ns, int cancel_fd, int *ret_fd)
{
	_cleanup_close_ int fd = -1;
	int k;

	switch (ep->kind) {
	case ENDPOINT_VSOCK: {
		struct sockaddr_vm svm = {
			.svm_family = AF_VSOCK,
			.svm_cid = ep->cid,
			.svm_port = ep->port,
		};
		if (ep->cid == VMADDR_CID_ANY)
			return -EINVAL;
		k = connect_deadline(AF_VSOCK, (struct sockaddr *)&svm, sizeof(svm), deadline_ns,
				     cancel_fd, &fd);
		break;
	}
	case ENDPOINT_HVSOCK:
	case ENDPOINT_UNIX: {
		_cleanup_close_ int path_fd = -1;
		struct sockaddr_un sun;
		socklen_t sun_len;

		k = unix_address(ep, dirs, &sun, &sun_len, &path_fd);
		if (k < 0)
			return k;
		k = connect_deadline(AF_UNIX, (struct sockaddr *)&sun, sun_len, deadline_ns,
				     cancel_fd, &fd);
		if (k == 0 && ep->kind == ENDPOINT_HVSOCK)
			k = hvsock_handshake(fd, ep->port, deadline_ns, cancel_fd);
		break;
	}
	default:
		return -EINVAL;
	}
	if (k < 0)
		return k;
	*ret_fd = move_fd(fd);
	return 0;
}

static void frame_readerp(struct frame_reader *r)
{
	frame_reader_free(r);
}

int agent_query(const struct endpoint *ep, int64_t timeout_ns, int cancel_fd,
		struct agent_status *ret)
{
	return agent_query_confined(ep, NULL, timeout_ns, cancel_fd, ret);
}

int agent_query_confined(const struct endpoint *ep, const struct sockdirs *dirs, int64_t timeout_ns,
			 int cancel_fd, struct agent_status *ret)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ uint8_t *request = NULL;
	_cleanup_(frame_readerp) struct frame_reader response;
	size_t request_len;
	int64_t now = monotonic_ns(), deadline_ns;
	int k;

	frame_reader_init(&response);
	if (!ep || !ret || timeout_ns <= 0)
		return -EINVAL;
	deadline_ns = (timeout_ns > INT64_MAX - now) ? INT64_MAX : now + timeout_ns;

	k = wire_encode_request(WIRE_METHOD_GET_GPU_INIT_STATUS, &request, &request_len);
	if (k < 0)
		return k;
	k = connect_endpoint(ep, dirs, deadline_ns, cancel_fd, &fd);
	if (k < 0)
		return k;
	k = fd_write_all(fd, request, request_len, deadline_ns, cancel_fd);
	if (k < 0)
		return k;
	k = frame_recv(fd, &response, deadline_ns, cancel_fd);
	if (k == -EMSGSIZE)
		return -EPROTO; /* an oversized frame is garbage from our side's view */
	if (k < 0)
		return k;
	return wire_decode_status_response(response.payload, response.payload_len, ret);
}
