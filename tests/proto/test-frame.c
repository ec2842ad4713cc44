/* SPDX-License-Identifier: MIT */
/* Unit tests for proto/frame.c: the header limit, the incremental reader
 * (truncated, oversized, back-to-back frames), the budgeted allocator, the
 * envelope codec on garbage and crafted input, message sanitizing, and the
 * deadline/cancel waits. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "proto/frame.h"
#include "proto/guest.pb-c.h"
#include "common/parse.h"
#include "tests/common/check-main.h"

START_TEST(test_header_limit)
{
	uint8_t h[FRAME_HEADER_SIZE];
	uint32_t len = 77;

	frame_header_encode(FRAME_PAYLOAD_MAX, h);
	ck_assert_int_eq(frame_header_decode(h, &len), 0);
	ck_assert_uint_eq(len, FRAME_PAYLOAD_MAX);

	frame_header_encode(0x01020304, h);
	ck_assert_uint_eq(h[0], 1);
	ck_assert_uint_eq(h[3], 4); /* big-endian */

	len = 77;
	frame_header_encode(FRAME_PAYLOAD_MAX + 1, h);
	ck_assert_int_eq(frame_header_decode(h, &len), -EMSGSIZE);
	memset(h, 0xff, sizeof(h));
	ck_assert_int_eq(frame_header_decode(h, &len), -EMSGSIZE);
	ck_assert_uint_eq(len, 77);
}
END_TEST

START_TEST(test_reader_byte_by_byte)
{
	const uint8_t frame[] = { 0, 0, 0, 3, 'a', 'b', 'c', 0, 0, 0, 1, 'z' };
	struct frame_reader r;
	size_t used, total = 0;
	int k = 0;

	frame_reader_init(&r);
	for (size_t i = 0; i < 7; i++) {
		k = frame_reader_feed(&r, frame + i, 1, &used);
		ck_assert_uint_eq(used, 1);
		total += used;
		if (i < 6)
			ck_assert_int_eq(k, 0); /* truncated: not complete yet */
	}
	ck_assert_int_eq(k, 1);
	ck_assert_uint_eq(total, 7);
	ck_assert_uint_eq(r.payload_len, 3);
	ck_assert_mem_eq(r.payload, "abc", 3);
	frame_reader_free(&r);

	/* Back to back in one buffer: the reader stops at the frame's end. */
	ck_assert_int_eq(frame_reader_feed(&r, frame, sizeof(frame), &used), 1);
	ck_assert_uint_eq(used, 7);
	frame_reader_free(&r);
	ck_assert_int_eq(frame_reader_feed(&r, frame + 7, sizeof(frame) - 7, &used), 1);
	ck_assert_uint_eq(used, 5);
	ck_assert_mem_eq(r.payload, "z", 1);
	frame_reader_free(&r);

	/* An empty payload is a complete frame. */
	ck_assert_int_eq(frame_reader_feed(&r, (const uint8_t[]){ 0, 0, 0, 0 }, 4, &used), 1);
	ck_assert_uint_eq(r.payload_len, 0);
	frame_reader_free(&r);
}
END_TEST

START_TEST(test_reader_oversized_before_alloc)
{
	const uint8_t huge[] = { 0x7f, 0xff, 0xff, 0xff, 'x' };
	struct frame_reader r;
	size_t used;

	frame_reader_init(&r);
	ck_assert_int_eq(frame_reader_feed(&r, huge, sizeof(huge), &used), -EMSGSIZE);
	ck_assert_ptr_null(r.payload); /* refused before any allocation */
	frame_reader_free(&r);

	uint8_t just_over[4];
	frame_header_encode(FRAME_PAYLOAD_MAX + 1, just_over);
	ck_assert_int_eq(frame_reader_feed(&r, just_over, 4, &used), -EMSGSIZE);
	ck_assert_ptr_null(r.payload);
	frame_reader_free(&r);
}
END_TEST

START_TEST(test_reader_fill_socket)
{
	int sv[2];
	struct frame_reader r;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	frame_reader_init(&r);
	ck_assert_int_eq(frame_reader_fill(&r, sv[0]), 0); /* nothing yet: would block */
	ck_assert_int_eq(write(sv[1], "\0\0\0\5ab", 6), 6);
	ck_assert_int_eq(frame_reader_fill(&r, sv[0]), 0);
	ck_assert_int_eq(write(sv[1], "cde", 3), 3);
	ck_assert_int_eq(frame_reader_fill(&r, sv[0]), 1);
	ck_assert_mem_eq(r.payload, "abcde", 5);
	frame_reader_free(&r);

	/* Truncated by EOF inside a frame vs. EOF between frames. */
	ck_assert_int_eq(write(sv[1], "\0\0\0\5ab", 6), 6);
	close(sv[1]);
	ck_assert_int_eq(frame_reader_fill(&r, sv[0]), -ECONNRESET);
	frame_reader_free(&r);
	ck_assert_int_eq(frame_reader_fill(&r, sv[0]), -EPIPE);
	frame_reader_free(&r);
	close(sv[0]);

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	ck_assert_int_eq(write(sv[1], "\xff\xff\xff\xff", 4), 4);
	ck_assert_int_eq(frame_reader_fill(&r, sv[0]), -EMSGSIZE);
	ck_assert_ptr_null(r.payload);
	frame_reader_free(&r);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* Unpack one frame's payload, i.e. strip the 4-byte header. */
static const uint8_t *body(const uint8_t *frame)
{
	return frame + FRAME_HEADER_SIZE;
}

START_TEST(test_budget_allocator)
{
	_cleanup_free_ char *method = malloc(60000);
	_cleanup_free_ uint8_t *buf = NULL;
	Vfhealth__Request req = VFHEALTH__REQUEST__INIT;
	struct budget_allocator a;
	size_t n;

	memset(method, 'm', 59999);
	method[59999] = '\0';
	req.method = method;
	n = vfhealth__request__get_packed_size(&req);
	buf = malloc(n);
	vfhealth__request__pack(&req, buf);

	budget_allocator_init(&a, 1024);
	ck_assert_ptr_null(vfhealth__request__unpack(&a.base, n, buf));
	ck_assert(a.exhausted);
	ck_assert_uint_le(a.used, 1024);

	budget_allocator_init(&a, WIRE_UNPACK_BUDGET);
	Vfhealth__Request *ok = vfhealth__request__unpack(&a.base, n, buf);
	ck_assert_ptr_nonnull(ok);
	ck_assert_uint_eq(strlen(ok->method), 59999);
	ck_assert(!a.exhausted);
	vfhealth__request__free_unpacked(ok, &a.base);
}
END_TEST

START_TEST(test_request_codec)
{
	_cleanup_free_ uint8_t *frame = NULL;
	struct wire_request req;
	size_t len;
	char long_name[WIRE_METHOD_MAX + 2];

	ck_assert_int_eq(wire_encode_request(WIRE_METHOD_GET_GPU_INIT_STATUS, &frame, &len), 0);
	ck_assert_int_eq(wire_decode_request(body(frame), len - 4, &req), 0);
	ck_assert_str_eq(req.method, "GetGPUInitStatus");
	ck_assert(!req.method_too_long);
	free(frame);
	frame = NULL;

	ck_assert_int_eq(wire_encode_request("Reboot", &frame, &len), 0);
	ck_assert_int_eq(wire_decode_request(body(frame), len - 4, &req), 0);
	ck_assert_str_eq(req.method, "Reboot");

	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	ck_assert_int_eq(wire_encode_request(long_name, &frame, &len), -EINVAL);

	/* A long method name from a peer is kept out, not truncated into a
	 * name we might know. */
	Vfhealth__Request r = VFHEALTH__REQUEST__INIT;
	uint8_t buf[256];
	r.method = long_name;
	len = vfhealth__request__pack(&r, buf);
	ck_assert_int_eq(wire_decode_request(buf, len, &req), 0);
	ck_assert(req.method_too_long);
	ck_assert_str_eq(req.method, "");

	/* The known method with a payload that is not its request message. */
	r.method = (char *)WIRE_METHOD_GET_GPU_INIT_STATUS;
	r.payload.data = (uint8_t *)"\xff\xff\xff";
	r.payload.len = 3;
	len = vfhealth__request__pack(&r, buf);
	ck_assert_int_eq(wire_decode_request(buf, len, &req), -EPROTO);
}
END_TEST

START_TEST(test_request_garbage)
{
	struct wire_request req = { .method = "untouched" };
	const uint8_t garbage[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
	const uint8_t truncated[] = { 0x0a, 0x10, 'G', 'e', 't' }; /* field 1, len 16, 3 bytes */

	ck_assert_int_eq(wire_decode_request(garbage, sizeof(garbage), &req), -EPROTO);
	ck_assert_int_eq(wire_decode_request(truncated, sizeof(truncated), &req), -EPROTO);
	ck_assert_str_eq(req.method, "untouched");
}
END_TEST

/* 64 KiB of two-byte unknown fields: legal protobuf that would cost far more
 * memory than its size to unpack.  The budget refuses it. */
START_TEST(test_request_unknown_field_bomb)
{
	size_t n = FRAME_PAYLOAD_MAX;
	_cleanup_free_ uint8_t *buf = malloc(n);
	struct wire_request req;

	for (size_t i = 0; i < n; i += 2) {
		buf[i] = (15 << 3) | 0; /* field 15, varint */
		buf[i + 1] = 0;
	}
	ck_assert_int_eq(wire_decode_request(buf, n, &req), -ENOMEM);
	/* The same shape, small, is fine: the refusal is the budget's. */
	ck_assert_int_eq(wire_decode_request(buf, 64, &req), 0);
	ck_assert_str_eq(req.method, "");
}
END_TEST

START_TEST(test_response_codec)
{
	_cleanup_free_ uint8_t *frame = NULL;
	struct agent_status in = { .state = GPU_INIT_FAILED }, out;
	size_t len;

	strcpy(in.message, "NVRM: GPU 0000:00:03.0: RmInitAdapter failed! (0x22:0x65:884)");
	ck_assert_int_eq(wire_encode_status_response(&in, &frame, &len), 0);
	ck_assert_int_eq(wire_decode_status_response(body(frame), len - 4, &out), 0);
	ck_assert_int_eq(out.state, GPU_INIT_FAILED);
	ck_assert_str_eq(out.message, in.message);
	free(frame);
	frame = NULL;

	in.state = GPU_INIT_OK;
	in.message[0] = '\0';
	ck_assert_int_eq(wire_encode_status_response(&in, &frame, &len), 0);
	ck_assert_int_eq(wire_decode_status_response(body(frame), len - 4, &out), 0);
	ck_assert_int_eq(out.state, GPU_INIT_OK);
	ck_assert_str_eq(out.message, "");
	free(frame);
	frame = NULL;

	out.state = GPU_INIT_OK;
	ck_assert_int_eq(wire_encode_error_response(WIRE_STATUS_UNIMPLEMENTED, "no", &frame, &len),
			 0);
	ck_assert_int_eq(wire_decode_status_response(body(frame), len - 4, &out), -EOPNOTSUPP);
	free(frame);
	frame = NULL;
	ck_assert_int_eq(wire_encode_error_response(WIRE_STATUS_ERROR, "bad", &frame, &len), 0);
	ck_assert_int_eq(wire_decode_status_response(body(frame), len - 4, &out), -EPROTO);
	ck_assert_int_eq(wire_encode_error_response(WIRE_STATUS_OK, "x", &frame, &len), -EINVAL);
	ck_assert_int_eq(out.state, GPU_INIT_OK); /* untouched on failure */
}
END_TEST

START_TEST(test_response_wrong_type)
{
	struct agent_status out = { .state = GPU_INIT_OK };
	Vfhealth__Response resp = VFHEALTH__RESPONSE__INIT;
	Vfhealth__GetGPUInitStatusResponse inner = VFHEALTH__GET_GPUINIT_STATUS_RESPONSE__INIT;
	uint8_t ib[64], buf[128];
	size_t len;

	/* A state this side does not know. */
	inner.state = 7;
	resp.payload.data = ib;
	resp.payload.len = vfhealth__get_gpuinit_status_response__pack(&inner, ib);
	len = vfhealth__response__pack(&resp, buf);
	ck_assert_int_eq(wire_decode_status_response(buf, len, &out), -EPROTO);

	/* A status this side does not know. */
	inner.state = VFHEALTH__GPUINIT_STATE__GPU_INIT_STATE_FAILED;
	resp.payload.len = vfhealth__get_gpuinit_status_response__pack(&inner, ib);
	resp.status = 9;
	len = vfhealth__response__pack(&resp, buf);
	ck_assert_int_eq(wire_decode_status_response(buf, len, &out), -EPROTO);

	/* A payload that is not a GetGPUInitStatusResponse (wrong wire type
	 * for field 1). */
	resp.status = VFHEALTH__RESPONSE__STATUS__OK;
	resp.payload.data = (uint8_t *)"\x0a\x01x";
	resp.payload.len = 3;
	len = vfhealth__response__pack(&resp, buf);
	ck_assert_int_eq(wire_decode_status_response(buf, len, &out), -EPROTO);

	/* A Request where a Response belongs: field 1 is a string there. */
	_cleanup_free_ uint8_t *frame = NULL;
	ck_assert_int_eq(wire_encode_request("GetGPUInitStatus", &frame, &len), 0);
	ck_assert_int_eq(wire_decode_status_response(body(frame), len - 4, &out), -EPROTO);
	ck_assert_int_eq(wire_decode_status_response((const uint8_t *)"\xff\xff", 2, &out),
			 -EPROTO);
	ck_assert_int_eq(out.state, GPU_INIT_OK);
}
END_TEST

START_TEST(test_sanitize)
{
	char out[AGENT_MESSAGE_MAX + 1];
	_cleanup_free_ char *big = malloc(4096);

	wire_sanitize_message("a\nb\tc\x7f", 6, out);
	ck_assert_str_eq(out, "a b c ");
	wire_sanitize_message("x\0y", 3, out);
	ck_assert_str_eq(out, "x y");
	wire_sanitize_message("\xc3\xa9t\xc3\xa9", 5, out); /* été */
	ck_assert_str_eq(out, "\xc3\xa9t\xc3\xa9");
	wire_sanitize_message("\xc3(\xed\xa0\x80\xc0\xaf", 7, out); /* bad, surrogate, overlong */
	ck_assert_str_eq(out, "?(?????");                           /* c3 ( ed a0 80 c0 af */

	memset(big, 'a', 4096);
	wire_sanitize_message(big, 4096, out);
	ck_assert_uint_eq(strlen(out), AGENT_MESSAGE_MAX);

	/* A 3-byte character straddling the limit is dropped whole. */
	memset(big, 'a', AGENT_MESSAGE_MAX - 1);
	memcpy(big + AGENT_MESSAGE_MAX - 1, "\xe2\x82\xac", 3); /* € */
	wire_sanitize_message(big, AGENT_MESSAGE_MAX + 2, out);
	ck_assert_uint_eq(strlen(out), AGENT_MESSAGE_MAX - 1);
}
END_TEST

START_TEST(test_wait_deadline_and_cancel)
{
	int sv[2];
	_cleanup_close_ int cancel = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int64_t start = monotonic_ns();

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	ck_assert_int_eq(fd_wait(sv[0], POLLIN, start + 50 * 1000000LL, cancel), -ETIMEDOUT);
	int64_t took = monotonic_ns() - start;
	ck_assert_int_ge(took, 50 * 1000000LL);
	ck_assert_int_lt(took, 1000 * 1000000LL);

	ck_assert_int_eq(write(sv[1], "x", 1), 1);
	ck_assert_int_eq(fd_wait(sv[0], POLLIN, monotonic_ns() + 1000000000LL, cancel), 0);

	ck_assert_int_eq(eventfd_write(cancel, 1), 0);
	ck_assert_int_eq(fd_wait(sv[0], POLLIN, monotonic_ns() + 1000000000LL, cancel), -ECANCELED);

	/* A receive with only half a frame ends at the deadline. */
	struct frame_reader r;
	char x;
	ck_assert_int_eq(read(sv[0], &x, 1), 1);
	frame_reader_init(&r);
	ck_assert_int_eq(write(sv[1], "\0\0\0\10abc", 7), 7);
	start = monotonic_ns();
	ck_assert_int_eq(frame_recv(sv[0], &r, start + 100 * 1000000LL, -1), -ETIMEDOUT);
	ck_assert_int_lt(monotonic_ns() - start, 1000 * 1000000LL);
	frame_reader_free(&r);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

static const struct check_case frame_case = { .suite = "frame", .tcase = "core", .timeout = 20 };
CHECK_CASE_MAIN(frame_case, test_header_limit, test_reader_byte_by_byte,
		test_reader_oversized_before_alloc, test_reader_fill_socket, test_budget_allocator,
		test_request_codec, test_request_garbage, test_request_unknown_field_bomb,
		test_response_codec, test_response_wrong_type, test_sanitize,
		test_wait_deadline_and_cancel)
