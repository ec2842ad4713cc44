/* SPDX-License-Identifier: MIT */
/* agent_query against real Unix sockets served by a scripted fake peer (a
 * thread): a plain agent, and a fake VMM for hybrid vsock that checks the
 * "CONNECT PORT\n" line before it plays agent.  Each misbehaviour must map
 * to the errno client.h promises, within the deadline. */
/*
 * Design notes
 *
 * Threads: each test runs in its own Check fork; a test that needs a peer
 * starts one fake-peer thread (fake_serve) that accepts exactly one
 * connection, plays its script and returns.  Locks: none; the thread writes
 * f->handshake and f->method, which the test reads only after
 * pthread_join.  Shutdown: peers that stall wait for the client's EOF (the
 * client closes on its deadline), so every join is bounded by the query's
 * deadline.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "proto/client.h"
#include "proto/frame.h"
#include "common/parse.h"
#include "tests/common/check-main.h"

#define MS (1000 * 1000LL)

enum behaviour {
	ANSWER_FAILED,
	ANSWER_UNIMPLEMENTED,
	ANSWER_GARBAGE,
	ANSWER_OVERSIZED,
	ANSWER_HALF,    /* half a frame, then silence until the client leaves */
	ANSWER_NOTHING, /* read the request, never answer */
	CLOSE_AFTER_REQUEST,
	HS_BAD_REPLY,
	HS_CLOSE,
	HS_SILENT,
	HS_LONG_REPLY,
};

struct fake {
	char dir[64];
	char path[108];
	int listen_fd;
	bool hvsock;
	enum behaviour behaviour;
	char handshake[64]; /* what the fake VMM read before '\n' */
	char method[WIRE_METHOD_MAX + 1];
	pthread_t thread;
};

static const char nvrm_line[] = "NVRM: GPU 0000:00:03.0: RmInitAdapter failed! (0x22:0x65:884)";

static void write_all(int fd, const void *buf, size_t len)
{
	ck_assert_int_eq(fd_write_all(fd, buf, len, monotonic_ns() + 5000 * MS, -1), 0);
}

/* Block until the client closes its end. */
static void wait_for_eof(int fd)
{
	char c;
	while (read(fd, &c, 1) > 0)
		;
}

static void *fake_serve(void *arg)
{
	struct fake *f = arg;
	_cleanup_close_ int fd = accept4(f->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	_cleanup_free_ uint8_t *out = NULL;
	struct frame_reader r;
	struct wire_request req;
	size_t len = 0;

	if (fd < 0)
		return NULL;
	if (f->hvsock) {
		char c;
		while (len + 1 < sizeof(f->handshake) && read(fd, &c, 1) == 1 && c != '\n')
			f->handshake[len++] = c;
		switch (f->behaviour) {
		case HS_BAD_REPLY:
			write_all(fd, "NOPE\n", 5);
			wait_for_eof(fd);
			return NULL;
		case HS_CLOSE:
			return NULL;
		case HS_SILENT:
			wait_for_eof(fd);
			return NULL;
		case HS_LONG_REPLY: {
			char junk[200];
			memset(junk, 'O', sizeof(junk));
			write_all(fd, junk, sizeof(junk));
			wait_for_eof(fd);
			return NULL;
		}
		default:
			write_all(fd, "OK 1073741824\n", 14);
		}
	}

	frame_reader_init(&r);
	if (frame_reader_fill(&r, fd) != 1)
		return NULL; /* blocking fd: 1 or an error */
	if (wire_decode_request(r.payload, r.payload_len, &req) == 0)
		strcpy(f->method, req.method);
	frame_reader_free(&r);

	switch (f->behaviour) {
	case ANSWER_FAILED: {
		struct agent_status st = { .state = GPU_INIT_FAILED };
		strcpy(st.message, nvrm_line);
		ck_assert_int_eq(wire_encode_status_response(&st, &out, &len), 0);
		write_all(fd, out, len);
		break;
	}
	case ANSWER_UNIMPLEMENTED:
		ck_assert_int_eq(wire_encode_error_response(WIRE_STATUS_UNIMPLEMENTED,
							    "unknown method", &out, &len),
				 0);
		write_all(fd, out, len);
		break;
	case ANSWER_GARBAGE:
		write_all(fd, "\0\0\0\6\xff\xff\xff\xff\xff\xff", 10);
		break;
	case ANSWER_OVERSIZED:
		write_all(fd, "\x40\0\0\0", 4); /* 1 GiB */
		wait_for_eof(fd);
		break;
	case ANSWER_HALF:
		write_all(fd, "\0\0\0\x40\x08", 5);
		wait_for_eof(fd);
		break;
	case ANSWER_NOTHING:
		wait_for_eof(fd);
		break;
	default:
		break;
	}
	return NULL;
}

static void fake_start(struct fake *f, bool hvsock, enum behaviour b)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	memset(f, 0, sizeof(*f));
	f->hvsock = hvsock;
	f->behaviour = b;
	strcpy(f->dir, "/tmp/vfh-client-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/peer.sock", f->dir);
	strcpy(sun.sun_path, f->path);
	f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(f->listen_fd, 0);
	ck_assert_int_eq(bind(f->listen_fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	ck_assert_int_eq(listen(f->listen_fd, 8), 0);
	ck_assert_int_eq(pthread_create(&f->thread, NULL, fake_serve, f), 0);
}

static void fake_stop(struct fake *f)
{
	pthread_join(f->thread, NULL);
	close(f->listen_fd);
	unlink(f->path);
	rmdir(f->dir);
}

/* Query the fake with the given endpoint suffix (":PORT" for hvsock). */
static int query(struct fake *f, const char *suffix, int64_t timeout_ns, int cancel_fd,
		 struct agent_status *st)
{
	char s[ENDPOINT_STRING_MAX];
	struct endpoint ep;

	snprintf(s, sizeof(s), "%s:%s%s", f->hvsock ? "hvsock" : "unix", f->path, suffix);
	ck_assert_int_eq(endpoint_parse(s, &ep), 0);
	return agent_query(&ep, timeout_ns, cancel_fd, st);
}

START_TEST(test_unix_answer)
{
	struct fake f;
	struct agent_status st;

	fake_start(&f, false, ANSWER_FAILED);
	ck_assert_int_eq(query(&f, "", 5000 * MS, -1, &st), 0);
	fake_stop(&f);
	ck_assert_int_eq(st.state, GPU_INIT_FAILED);
	ck_assert_str_eq(st.message, nvrm_line);
	ck_assert_str_eq(f.method, "GetGPUInitStatus");
	ck_assert_str_eq(gpu_init_state_name(st.state), "failed");
}
END_TEST

START_TEST(test_hvsock_handshake)
{
	struct fake f;
	struct agent_status st;

	fake_start(&f, true, ANSWER_FAILED);
	ck_assert_int_eq(query(&f, "", 5000 * MS, -1, &st), 0);
	fake_stop(&f);
	ck_assert_str_eq(f.handshake, "CONNECT 2222");
	ck_assert_int_eq(st.state, GPU_INIT_FAILED);
	ck_assert_str_eq(f.method, "GetGPUInitStatus");

	fake_start(&f, true, ANSWER_FAILED);
	ck_assert_int_eq(query(&f, ":5000", 5000 * MS, -1, &st), 0);
	fake_stop(&f);
	ck_assert_str_eq(f.handshake, "CONNECT 5000");
}
END_TEST

START_TEST(test_hvsock_bad_vmm)
{
	struct fake f;
	struct agent_status st = { .state = GPU_INIT_OK };
	int64_t start;

	fake_start(&f, true, HS_BAD_REPLY);
	ck_assert_int_eq(query(&f, "", 5000 * MS, -1, &st), -EPROTO);
	fake_stop(&f);

	fake_start(&f, true, HS_LONG_REPLY);
	ck_assert_int_eq(query(&f, "", 5000 * MS, -1, &st), -EPROTO);
	fake_stop(&f);

	fake_start(&f, true, HS_CLOSE);
	ck_assert_int_eq(query(&f, "", 5000 * MS, -1, &st), -ECONNRESET);
	fake_stop(&f);

	fake_start(&f, true, HS_SILENT);
	start = monotonic_ns();
	ck_assert_int_eq(query(&f, "", 200 * MS, -1, &st), -ETIMEDOUT);
	ck_assert_int_ge(monotonic_ns() - start, 200 * MS);
	ck_assert_int_lt(monotonic_ns() - start, 20000 * MS); /* the peer never answers */
	fake_stop(&f);
	ck_assert_int_eq(st.state, GPU_INIT_OK); /* untouched */
}
END_TEST

START_TEST(test_unimplemented)
{
	struct fake f;
	struct agent_status st;

	fake_start(&f, false, ANSWER_UNIMPLEMENTED);
	ck_assert_int_eq(query(&f, "", 5000 * MS, -1, &st), -EOPNOTSUPP);
	fake_stop(&f);
}
END_TEST

START_TEST(test_garbage_and_oversized)
{
	struct fake f;
	struct agent_status st;
	int64_t start;

	fake_start(&f, false, ANSWER_GARBAGE);
	ck_assert_int_eq(query(&f, "", 5000 * MS, -1, &st), -EPROTO);
	fake_stop(&f);

	fake_start(&f, false, ANSWER_OVERSIZED);
	start = monotonic_ns();
	ck_assert_int_eq(query(&f, "", 60000 * MS, -1, &st), -EPROTO);
	ck_assert_int_lt(monotonic_ns() - start, 30000 * MS); /* refused at the header */
	fake_stop(&f);

	fake_start(&f, false, CLOSE_AFTER_REQUEST);
	ck_assert_int_eq(query(&f, "", 5000 * MS, -1, &st), -ECONNRESET);
	fake_stop(&f);
}
END_TEST

START_TEST(test_slow_peer_deadline)
{
	struct fake f;
	struct agent_status st;
	int64_t start;

	fake_start(&f, false, ANSWER_HALF);
	start = monotonic_ns();
	ck_assert_int_eq(query(&f, "", 300 * MS, -1, &st), -ETIMEDOUT);
	ck_assert_int_ge(monotonic_ns() - start, 300 * MS);
	ck_assert_int_lt(monotonic_ns() - start, 20000 * MS); /* the rest never comes */
	fake_stop(&f);
}
END_TEST

START_TEST(test_cancel)
{
	struct fake f;
	struct agent_status st;
	_cleanup_close_ int cancel = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int64_t start;

	fake_start(&f, false, ANSWER_NOTHING);
	ck_assert_int_eq(eventfd_write(cancel, 1), 0);
	start = monotonic_ns();
	ck_assert_int_eq(query(&f, "", 60000 * MS, cancel, &st), -ECANCELED);
	ck_assert_int_lt(monotonic_ns() - start, 30000 * MS);
	fake_stop(&f);
}
END_TEST

START_TEST(test_connect_errors)
{
	char dir[] = "/tmp/vfh-client-XXXXXX", s[ENDPOINT_STRING_MAX];
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct endpoint ep;
	struct agent_status st;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(s, sizeof(s), "unix:%s/none.sock", dir);
	ck_assert_int_eq(endpoint_parse(s, &ep), 0);
	ck_assert_int_eq(agent_query(&ep, 1000 * MS, -1, &st), -ENOENT);

	/* bound but not listening */
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/none.sock", dir);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	ck_assert_int_eq(agent_query(&ep, 1000 * MS, -1, &st), -ECONNREFUSED);
	ep.kind = ENDPOINT_HVSOCK;
	ep.port = 2222;
	ck_assert_int_eq(agent_query(&ep, 1000 * MS, -1, &st), -ECONNREFUSED);
	unlink(sun.sun_path);
	rmdir(dir);

	ck_assert_int_eq(agent_query(&ep, 0, -1, &st), -EINVAL);
	ck_assert_int_eq(endpoint_parse_listen("vsock:any", &ep), 0);
	ck_assert_int_eq(agent_query(&ep, 1000 * MS, -1, &st), -EINVAL);
}
END_TEST

static const struct check_case client_case = { .suite = "client", .tcase = "core", .timeout = 30 };
CHECK_CASE_MAIN(client_case, test_unix_answer, test_hvsock_handshake, test_hvsock_bad_vmm,
		test_unimplemented, test_garbage_and_oversized, test_slow_peer_deadline,
		test_cancel, test_connect_errors)
