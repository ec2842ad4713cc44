/* SPDX-License-Identifier: MIT */
/*
 * fuzz-wire.c - protobuf unpacking of peer bytes (proto/frame.c: the
 * Request an agent receives and the Response the sentinel receives), both
 * through the budgeted allocator.  Invariants: failure leaves the result
 * untouched; a decoded status has a known state and a message that is
 * clean (no control characters, at most AGENT_MESSAGE_MAX bytes) and that
 * survives encode/decode unchanged; a decoded method fits its buffer.
 */
#include <errno.h>

#include "common/cleanup.h"
#include "proto/frame.h"
#include "tests/fuzz/fuzz.h"

static void check_clean(const char *msg)
{
	size_t n = strnlen(msg, AGENT_MESSAGE_MAX + 1);

	fuzz_check(n <= AGENT_MESSAGE_MAX);
	for (size_t i = 0; i < n; i++)
		fuzz_check((unsigned char)msg[i] >= 0x20 && msg[i] != 0x7f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wire_request req, req_untouched;
	struct agent_status st, st_untouched, st2;
	int r;

	fuzz_poison(req, req_untouched, 0x5a);
	r = wire_decode_request(data, size, &req);
	fuzz_check(r == 0 || r == -EPROTO || r == -ENOMEM);
	if (r < 0) {
		fuzz_untouched(req, req_untouched);
	} else {
		fuzz_check(strnlen(req.method, sizeof(req.method)) < sizeof(req.method));
		if (req.method_too_long)
			fuzz_check(req.method[0] == '\0');
	}

	fuzz_poison(st, st_untouched, 0x5a);
	r = wire_decode_status_response(data, size, &st);
	fuzz_check(r == 0 || r == -EPROTO || r == -EOPNOTSUPP);
	if (r < 0) {
		fuzz_untouched(st, st_untouched);
		return 0;
	}
	fuzz_check(st.state == GPU_INIT_UNKNOWN || st.state == GPU_INIT_OK ||
		   st.state == GPU_INIT_FAILED);
	check_clean(st.message);

	/* What the sentinel decoded, an agent would send back identically. */
	_cleanup_free_ uint8_t *frame = NULL;
	size_t frame_len = 0;
	uint32_t payload_len;

	fuzz_check(wire_encode_status_response(&st, &frame, &frame_len) == 0);
	fuzz_check(frame_len >= FRAME_HEADER_SIZE);
	fuzz_check(frame_header_decode(frame, &payload_len) == 0);
	fuzz_check(payload_len == frame_len - FRAME_HEADER_SIZE);
	memset(&st2, 0, sizeof(st2));
	fuzz_check(wire_decode_status_response(frame + FRAME_HEADER_SIZE, payload_len, &st2) == 0);
	fuzz_check(st2.state == st.state);
	fuzz_check(strcmp(st2.message, st.message) == 0);
	return 0;
}
