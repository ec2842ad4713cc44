/* SPDX-License-Identifier: MIT */
/*
 * adversary.c - guest agents that misbehave, on Unix sockets, for the
 * sentinel's adversarial test (sentinel-hostile.sh); and two that behave.
 *
 *   adversary DIR MODE:COUNT...
 *
 * Binds DIR/MODE-I.sock for I in 0..COUNT-1 and DIR/control.sock (a VMM
 * control socket that exists, so the sentinel polls the claims), prints
 * "ready" and serves until stdin reaches EOF or a signal.  Modes, per
 * accepted connection:
 *
 *   garbage    reads the request, answers a 32-byte frame of 0xff (not protobuf)
 *   huge       answers a frame header claiming 2 GiB, then nothing
 *   trickle    reads the request, answers a valid frame one byte per second
 *   half       reads the request, sends half of a valid frame, hangs up
 *   wrongtype  reads the request, sends it back (a Request, not a Response)
 *   silent     accepts and never reads, writes or closes (connections pile up)
 *   ok         a correct agent whose GPU initialized
 *   failed     a correct agent that saw "RmInitAdapter failed!"
 *   witness    prints "accepted MODE-I" on stdout and hangs up (counts
 *              who reaches a socket that must never be reached)
 *
 * Design notes: one thread, one poll() loop over the listeners and every
 * connection; a once-a-second tick drives the trickle.  No locks.  Limits:
 * at most CONN_MAX connections held (further ones are accepted and closed),
 * requests read up to one frame of FRAME_PAYLOAD_MAX.  Shutdown: stdin EOF
 * or SIGTERM ends the loop; the kernel closes everything.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "proto/frame.h"
#include "common/parse.h"

#define CONN_MAX 8192
#define LISTENER_MAX 2048

enum mode {
	M_GARBAGE,
	M_HUGE,
	M_TRICKLE,
	M_HALF,
	M_WRONGTYPE,
	M_SILENT,
	M_OK,
	M_FAILED,
	M_WITNESS,
	M_COUNT
};
static const char *const mode_names[M_COUNT] = {
	"garbage", "huge", "trickle", "half", "wrongtype", "silent", "ok", "failed", "witness",
};
static unsigned listener_index[LISTENER_MAX]; /* I of MODE-I.sock */

struct conn {
	int fd;
	enum mode mode;
	struct frame_reader request;
	bool answered;
	uint8_t *out; /* trickle: the frame still to send */
	size_t out_len, out_pos;
};

static struct pollfd pfds[LISTENER_MAX + CONN_MAX + 1];
static enum mode listener_mode[LISTENER_MAX];
static size_t n_listeners;
static struct conn conns[CONN_MAX];
static size_t n_conns;
static uint8_t *frame_ok, *frame_failed;
static size_t frame_ok_len, frame_failed_len;

static int listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path));
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return negative_errno();
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 4096) < 0) {
		int r = negative_errno();
		close(fd);
		return r;
	}
	return fd;
}

static void send_all(int fd, const void *buf, size_t len)
{
	/* Best effort: a peer that left is the sentinel's deadline at work. */
	(void)!send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void conn_close(size_t i)
{
	close(conns[i].fd);
	frame_reader_free(&conns[i].request);
	free(conns[i].out);
	conns[i] = conns[--n_conns];
}

/* The request is in: answer according to the mode.  Returns true to close. */
static bool answer(struct conn *c)
{
	static const uint8_t garbage[FRAME_HEADER_SIZE + 32] = {
		0,    0,    0,    32,   0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	};
	_cleanup_free_ uint8_t *echo = NULL;
	size_t echo_len;

	c->answered = true;
	switch (c->mode) {
	case M_GARBAGE:
		send_all(c->fd, garbage, sizeof(garbage));
		return true;
	case M_HALF:
		send_all(c->fd, frame_failed, frame_failed_len / 2);
		return true;
	case M_WRONGTYPE:
		if (frame_encode(c->request.payload, c->request.payload_len, &echo, &echo_len) == 0)
			send_all(c->fd, echo, echo_len);
		return true;
	case M_OK:
		send_all(c->fd, frame_ok, frame_ok_len);
		return true;
	case M_FAILED:
		send_all(c->fd, frame_failed, frame_failed_len);
		return true;
	case M_TRICKLE:
		c->out = malloc(frame_ok_len);
		if (!c->out)
			return true;
		memcpy(c->out, frame_ok, frame_ok_len);
		c->out_len = frame_ok_len;
		return false; /* the tick sends it */
	default:
		return false;
	}
}

static void on_accept(size_t l)
{
	for (;;) {
		int fd = accept4(pfds[l].fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		if (listener_mode[l] == M_WITNESS) {
			printf("accepted witness-%u\n", listener_index[l]);
			fflush(stdout);
			close(fd);
			continue;
		}
		if (n_conns == CONN_MAX) {
			close(fd);
			continue;
		}
		struct conn *c = &conns[n_conns++];
		memset(c, 0, sizeof(*c));
		c->fd = fd;
		c->mode = listener_mode[l];
		frame_reader_init(&c->request);
		if (c->mode == M_HUGE) {
			uint8_t header[FRAME_HEADER_SIZE] = { 0x7f, 0xff, 0xff, 0xff };
			send_all(fd, header, sizeof(header));
			c->answered = true;
		}
	}
}

/* Readable: read the request (or notice the peer left).  True to close. */
static bool on_readable(struct conn *c)
{
	if (c->mode == M_SILENT)
		return false; /* never reads: the socket buffer is the peer's problem */
	if (c->answered) {
		char sink[4096];
		ssize_t n = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);
		return n == 0 || (n < 0 && errno != EAGAIN);
	}
	int k = frame_reader_fill(&c->request, c->fd);
	if (k == 0)
		return false;
	if (k < 0)
		return true;
	return answer(c);
}

static void tick(void)
{
	for (size_t i = 0; i < n_conns; i++) {
		struct conn *c = &conns[i];
		if (c->mode == M_TRICKLE && c->out && c->out_pos < c->out_len) {
			if (send(c->fd, c->out + c->out_pos, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
				c->out_pos++;
		}
	}
}

static int parse_mode(const char *s, enum mode *ret, unsigned *count)
{
	const char *colon = strchr(s, ':');
	uint64_t n;

	if (!colon || parse_uint64(colon + 1, 1, LISTENER_MAX, &n) < 0)
		return -EINVAL;
	for (int m = 0; m < M_COUNT; m++)
		if (strlen(mode_names[m]) == (size_t)(colon - s) &&
		    strncmp(s, mode_names[m], (size_t)(colon - s)) == 0) {
			*ret = (enum mode)m;
			*count = (unsigned)n;
			return 0;
		}
	return -EINVAL;
}

int main(int argc, char **argv)
{
	struct agent_status ok = { .state = GPU_INIT_OK }, failed = { .state = GPU_INIT_FAILED };
	struct rlimit rl;
	char path[256];
	int64_t next_tick;
	int control;

	if (argc < 3) {
		fprintf(stderr, "usage: adversary DIR MODE:COUNT...\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	/* Held connections are the point of "silent": allow many. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	snprintf(failed.message, sizeof(failed.message),
		 "NVRM: GPU 0000:00:05.0: RmInitAdapter failed! (0x22:0x65:884)");
	if (wire_encode_status_response(&ok, &frame_ok, &frame_ok_len) < 0 ||
	    wire_encode_status_response(&failed, &frame_failed, &frame_failed_len) < 0)
		return 1;

	snprintf(path, sizeof(path), "%s/control.sock", argv[1]);
	control = listen_unix(path);
	if (control < 0) {
		fprintf(stderr, "adversary: %s: %s\n", path, strerror(-control));
		return 1;
	}
	for (int a = 2; a < argc; a++) {
		enum mode m;
		unsigned count;

		if (parse_mode(argv[a], &m, &count) < 0 || n_listeners + count > LISTENER_MAX) {
			fprintf(stderr, "adversary: bad MODE:COUNT '%s'\n", argv[a]);
			return 2;
		}
		for (unsigned i = 0; i < count; i++) {
			snprintf(path, sizeof(path), "%s/%s-%u.sock", argv[1], mode_names[m], i);
			int fd = listen_unix(path);
			if (fd < 0) {
				fprintf(stderr, "adversary: %s: %s\n", path, strerror(-fd));
				return 1;
			}
			listener_mode[n_listeners] = m;
			listener_index[n_listeners] = i;
			pfds[n_listeners++] = (struct pollfd){ .fd = fd, .events = POLLIN };
		}
	}
	printf("ready\n");
	fflush(stdout);

	next_tick = monotonic_ns() + 1000000000;
	for (;;) {
		size_t base = n_listeners;
		int64_t now;

		/* Silent connections are held but never polled (poll reports a
		 * hangup even with no events asked, and we never act on it). */
		for (size_t i = 0; i < n_conns; i++)
			pfds[base + i] = (struct pollfd){
				.fd = conns[i].mode == M_SILENT ? -1 : conns[i].fd,
				.events = POLLIN,
			};
		pfds[base + n_conns] = (struct pollfd){ .fd = STDIN_FILENO, .events = POLLIN };
		now = monotonic_ns();
		int timeout_ms = next_tick > now ? (int)((next_tick - now) / 1000000) + 1 : 0;
		if (poll(pfds, base + n_conns + 1, timeout_ms) < 0 && errno != EINTR)
			return 1;
		if (pfds[base + n_conns].revents) {
			char c;
			if (read(STDIN_FILENO, &c, 1) <= 0)
				return 0;
		}
		/* Connections first (indices stay valid until one is closed). */
		size_t n_polled = n_conns;
		for (size_t i = n_polled; i-- > 0;) {
			short re = pfds[base + i].revents;
			if (conns[i].mode == M_SILENT || !re)
				continue;
			if ((re & (POLLIN | POLLHUP | POLLERR)) && on_readable(&conns[i]))
				conn_close(i);
		}
		for (size_t l = 0; l < n_listeners; l++)
			if (pfds[l].revents & POLLIN)
				on_accept(l);
		if (monotonic_ns() >= next_tick) {
			tick();
			next_tick += 1000000000;
		}
	}
}
