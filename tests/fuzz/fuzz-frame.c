/* SPDX-License-Identifier: MIT */
/*
 * fuzz-frame.c - the frame reader (proto/frame.c), which sees every byte a
 * guest agent sends.  The first input byte picks a chunk size; the rest is
 * the stream, fed to frame_reader_feed in chunks of that size, frame after
 * frame, and (for small inputs) written into a pipe and read back with
 * frame_reader_fill, which must agree.  Invariants: a length above
 * FRAME_PAYLOAD_MAX is refused as soon as the header is in; a complete
 * payload is exactly the bytes after its header; nothing past the end of a
 * frame is consumed.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "proto/frame.h"
#include "tests/fuzz/fuzz.h"

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Feed the stream in chunks; returns how many whole frames it held. */
static size_t feed_stream(const uint8_t *stream, size_t len, size_t chunk)
{
	size_t pos = 0, frames = 0;

	while (pos < len) {
		struct frame_reader r;
		size_t start = pos;
		int k = 0;

		frame_reader_init(&r);
		while (pos < len) {
			size_t n = MIN(chunk, len - pos), used = 0;

			k = frame_reader_feed(&r, stream + pos, n, &used);
			fuzz_check(used <= n);
			pos += used;
			if (k != 0)
				break;
			fuzz_check(used == n); /* wanting more, it takes all it is given */
		}
		if (k == -EMSGSIZE) {
			fuzz_check(pos - start == FRAME_HEADER_SIZE);
			fuzz_check(be32(stream + start) > FRAME_PAYLOAD_MAX);
			fuzz_check(r.payload == NULL);
			frame_reader_free(&r);
			return frames;
		}
		fuzz_check(k == 0 || k == 1);
		if (k == 1) {
			uint32_t want = be32(stream + start);

			fuzz_check(r.complete && r.payload_len == want);
			fuzz_check(pos - start == FRAME_HEADER_SIZE + (size_t)want);
			fuzz_check(memcmp(r.payload, stream + start + FRAME_HEADER_SIZE, want) ==
				   0);
			/* A complete reader takes nothing more. */
			size_t used = 7;
			fuzz_check(frame_reader_feed(&r, stream, len, &used) == 1 && used == 0);
			frames++;
		}
		frame_reader_free(&r);
		frame_reader_free(&r); /* documented as safe twice */
	}
	return frames;
}

/* The same first frame through a non-blocking pipe and frame_reader_fill. */
static void fill_from_pipe(const uint8_t *stream, size_t len)
{
	int fds[2];
	struct frame_reader r;
	int k;

	if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0)
		return;
	_cleanup_close_ int rfd = fds[0];
	{
		_cleanup_close_ int wfd = fds[1];
		if (len > 0 && write(wfd, stream, len) != (ssize_t)len)
			return; /* larger than the pipe: skip */
	}
	frame_reader_init(&r);
	k = frame_reader_fill(&r, rfd);
	if (len == 0) {
		fuzz_check(k == -EPIPE);
	} else if (len < FRAME_HEADER_SIZE) {
		fuzz_check(k == -ECONNRESET);
	} else if (be32(stream) > FRAME_PAYLOAD_MAX) {
		fuzz_check(k == -EMSGSIZE);
	} else if (len < FRAME_HEADER_SIZE + (size_t)be32(stream)) {
		fuzz_check(k == -ECONNRESET); /* EOF inside the frame */
	} else {
		fuzz_check(k == 1 && r.payload_len == be32(stream));
		fuzz_check(memcmp(r.payload, stream + FRAME_HEADER_SIZE, r.payload_len) == 0);
	}
	frame_reader_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t chunk = (size_t)data[0] + 1;
	const uint8_t *stream = data + 1;
	size_t len = size - 1;

	feed_stream(stream, len, chunk);
	if (len <= 4096)
		fill_from_pipe(stream, len);

	/* frame_encode round trip: the payload is the stream itself when it fits. */
	if (len <= FRAME_PAYLOAD_MAX) {
		_cleanup_free_ uint8_t *frame = NULL;
		size_t frame_len = 0;

		fuzz_check(frame_encode(stream, len, &frame, &frame_len) == 0);
		fuzz_check(frame_len == FRAME_HEADER_SIZE + len);
		fuzz_check(feed_stream(frame, frame_len, chunk) == 1);
	}
	return 0;
}
