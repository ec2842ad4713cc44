/* SPDX-License-Identifier: MIT */
/*
 * frame.h - the wire between host and guest agent, one copy for both sides.
 *
 * A frame is a 4-byte big-endian payload length followed by that many bytes
 * of protobuf (proto/guest.proto).  Limits on what a peer controls:
 *
 *   FRAME_PAYLOAD_MAX    64 KiB: a longer length is refused (-EMSGSIZE) as
 *                        soon as the 4 header bytes are in, before anything
 *                        is allocated for the payload;
 *   WIRE_UNPACK_BUDGET   every protobuf unpack of peer bytes goes through a
 *                        budgeted ProtobufCAllocator that fails past this many
 *                        bytes in total, so crafted input (thousands of
 *                        unknown fields, say) cannot make us allocate more;
 *   WIRE_METHOD_MAX      method names longer than this are never a method we
 *                        know and are answered UNIMPLEMENTED.
 *
 * Three layers, each usable alone:
 *
 *   1. pure codecs (no I/O, no globals; fuzzable): frame_header_encode/decode,
 *      the frame_reader state machine fed from memory, and the wire_*
 *      encode/decode functions for the Request/Response envelope.
 *   2. frame_reader_fill: a non-blocking read step for event loops.
 *   3. fd_wait, frame_send, frame_recv: blocking-with-deadline I/O on
 *      non-blocking descriptors, for the client.  Every wait is bounded by one
 *      absolute CLOCK_MONOTONIC deadline and aborted by an optional cancel fd.
 *
 * All functions return 0 (or a documented positive value) or -errno.
 * Thread-safe: no shared state.
 */
#ifndef VFHEALTH_FRAME_H
#define VFHEALTH_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "proto/client.h"

#define FRAME_HEADER_SIZE 4
#define FRAME_PAYLOAD_MAX ((size_t)64 * 1024)
#define WIRE_UNPACK_BUDGET ((size_t)256 * 1024)
#define WIRE_METHOD_MAX 64

#define WIRE_METHOD_GET_GPU_INIT_STATUS "GetGPUInitStatus"

/* ---- 1. pure codecs ---------------------------------------------------- */

void frame_header_encode(uint32_t payload_len, uint8_t header[static FRAME_HEADER_SIZE]);
/* -EMSGSIZE when the length exceeds FRAME_PAYLOAD_MAX; *ret_len untouched. */
int frame_header_decode(const uint8_t header[static FRAME_HEADER_SIZE], uint32_t *ret_len);

/* Incremental reader of one frame.  Initialize with frame_reader_init, release
 * with frame_reader_free (safe to call twice).  The payload buffer is
 * allocated only after a header within the limit has arrived. */
struct frame_reader {
	uint8_t header[FRAME_HEADER_SIZE];
	size_t header_got;
	uint32_t payload_len;
	uint8_t *payload; /* payload_len bytes (never NULL once complete) */
	size_t payload_got;
	bool complete;
};

void frame_reader_init(struct frame_reader *r);
void frame_reader_free(struct frame_reader *r);

/* Feed up to len bytes from memory; never consumes bytes past the end of the
 * frame.  *consumed is set to the bytes used.  Returns 1 once the frame is
 * complete (r->payload, r->payload_len), 0 when more bytes are needed,
 * -EMSGSIZE for an oversized length, -ENOMEM. */
int frame_reader_feed(struct frame_reader *r, const uint8_t *data, size_t len, size_t *consumed);

/* Encode a whole frame (header + payload) into a new buffer. */
int frame_encode(const uint8_t *payload, size_t len, uint8_t **ret_frame, size_t *ret_len);

/* A ProtobufCAllocator over malloc/free that refuses to hand out more than
 * `budget` bytes in total (frees do not refund: one budget per unpack).
 * Pass &a->base to protobuf-c's unpack and free_unpacked. */
struct budget_allocator {
	ProtobufCAllocator base;
	size_t budget;
	size_t used;
	bool exhausted; /* an allocation was refused */
};
void budget_allocator_init(struct budget_allocator *a, size_t budget);

/* What the agent needs from a request. */
struct wire_request {
	char method[WIRE_METHOD_MAX + 1]; /* "" when the name was too long */
	bool method_too_long;
};

/* Build a Request frame (header included) for method with an empty payload
 * message of that method. */
int wire_encode_request(const char *method, uint8_t **ret_frame, size_t *ret_len);

/* Decode a Request payload.  -EPROTO when the bytes are not a Request, or
 * when the method is one we know and its payload does not decode as that
 * method's request; -ENOMEM when the budget ran out (also garbage). */
int wire_decode_request(const uint8_t *buf, size_t len, struct wire_request *ret);

enum wire_status {
	WIRE_STATUS_OK = 0,
	WIRE_STATUS_UNIMPLEMENTED = 1,
	WIRE_STATUS_ERROR = 2,
};

/* Copy at most AGENT_MESSAGE_MAX bytes of in[0..len) into out as a clean
 * one-line string: cut at a UTF-8 boundary, invalid UTF-8 bytes replaced by
 * '?', control characters (and NUL) by ' '.  Pure; used on both sides, so a
 * message from kmsg or from a peer is always valid proto3 string content. */
void wire_sanitize_message(const char *in, size_t len, char out[static AGENT_MESSAGE_MAX + 1]);
/* The same, cut at AGENT_RULE_MAX bytes (a failure rule's text). */
void wire_sanitize_rule(const char *in, size_t len, char out[static AGENT_RULE_MAX + 1]);

/* Response frames (header included).  The status message goes through
 * wire_sanitize_message. */
int wire_encode_status_response(const struct agent_status *st, uint8_t **ret_frame,
				size_t *ret_len);
int wire_encode_error_response(enum wire_status status, const char *error, uint8_t **ret_frame,
			       size_t *ret_len);

/* Decode a Response payload to a GetGPUInitStatus answer.
 *   0            *ret filled (message cut to AGENT_MESSAGE_MAX at a UTF-8
 *                boundary, control characters replaced by spaces)
 *   -EOPNOTSUPP  status UNIMPLEMENTED
 *   -EPROTO      garbage, status ERROR, an unknown status or state, a payload
 *                that is not a GetGPUInitStatusResponse
 * *ret is untouched on failure. */
int wire_decode_status_response(const uint8_t *buf, size_t len, struct agent_status *ret);

/* ---- 2. event-loop step ------------------------------------------------ */

/* Read from a non-blocking fd into r until the frame is complete or the fd
 * would block.  Returns 1 complete, 0 would block (wait for POLLIN), -EPIPE
 * on EOF before the first byte, -ECONNRESET on EOF inside a frame,
 * -EMSGSIZE, -ENOMEM, or the read's -errno. */
int frame_reader_fill(struct frame_reader *r, int fd);

/* ---- 3. blocking with a deadline --------------------------------------- */

/* Wait until fd has one of events (POLLIN/POLLOUT) or an error/hangup.
 * deadline_ns is absolute CLOCK_MONOTONIC.  cancel_fd < 0 for none.
 * Returns 0, -ETIMEDOUT or -ECANCELED. */
int fd_wait(int fd, short events, int64_t deadline_ns, int cancel_fd);

/* Write all of buf to a non-blocking socket (no SIGPIPE). */
int fd_write_all(int fd, const void *buf, size_t len, int64_t deadline_ns, int cancel_fd);

/* Read one whole frame; the caller frees r with frame_reader_free.
 * -ECONNRESET on EOF, -EMSGSIZE on an oversized length, -ETIMEDOUT,
 * -ECANCELED, -errno. */
int frame_recv(int fd, struct frame_reader *r, int64_t deadline_ns, int cancel_fd);

#endif
