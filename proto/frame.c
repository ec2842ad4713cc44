/* SPDX-License-Identifier: MIT */
/* frame.c - length-prefixed protobuf frames, the envelope codec, and
 * deadline-bounded I/O.  Contract in frame.h. */
#include "proto/frame.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "proto/guest.pb-c.h"
#include "common/parse.h"

/* ---- framing ----------------------------------------------------------- */

void frame_header_encode(uint32_t payload_len, uint8_t header[static FRAME_HEADER_SIZE])
{
	header[0] = (uint8_t)(payload_len >> 24);
	header[1] = (uint8_t)(payload_len >> 16);
	header[2] = (uint8_t)(payload_len >> 8);
	header[3] = (uint8_t)payload_len;
}

int frame_header_decode(const uint8_t header[static FRAME_HEADER_SIZE], uint32_t *ret_len)
{
	uint32_t n = (uint32_t)header[0] << 24 | (uint32_t)header[1] << 16 |
		     (uint32_t)header[2] << 8 | (uint32_t)header[3];

	if (n > FRAME_PAYLOAD_MAX)
		return -EMSGSIZE;
	*ret_len = n;
	return 0;
}

void frame_reader_init(struct frame_reader *r)
{
	memset(r, 0, sizeof(*r));
}

void frame_reader_free(struct frame_reader *r)
{
	free(r->payload);
	frame_reader_init(r);
}

/* Called after bytes landed: check the header the moment it is whole (so an
 * oversized length is refused before the payload buffer exists), then note
 * completion. */
static int frame_reader_advance(struct frame_reader *r)
{
	if (r->header_got == FRAME_HEADER_SIZE && !r->payload) {
		int k = frame_header_decode(r->header, &r->payload_len);
		if (k < 0)
			return k;
		r->payload = malloc(r->payload_len ? r->payload_len : 1);
		if (!r->payload)
			return -ENOMEM;
	}
	if (r->payload && r->payload_got == r->payload_len) {
		r->complete = true;
		return 1;
	}
	return 0;
}

/* Where the next bytes of the frame go, and how many are still wanted. */
static uint8_t *frame_reader_slot(struct frame_reader *r, size_t *want)
{
	if (r->header_got < FRAME_HEADER_SIZE) {
		*want = FRAME_HEADER_SIZE - r->header_got;
		return r->header + r->header_got;
	}
	*want = r->payload_len - r->payload_got;
	return r->payload + r->payload_got;
}

static void frame_reader_landed(struct frame_reader *r, size_t n)
{
	if (r->header_got < FRAME_HEADER_SIZE)
		r->header_got += n;
	else
		r->payload_got += n;
}

int frame_reader_feed(struct frame_reader *r, const uint8_t *data, size_t len, size_t *consumed)
{
	size_t used = 0;
	int k;

	*consumed = 0;
	if (r->complete)
		return 1;
	for (;;) {
		size_t want;
		uint8_t *slot = frame_reader_slot(r, &want);
		size_t n = MIN(want, len - used);

		if (n > 0) {
			memcpy(slot, data + used, n);
			used += n;
			frame_reader_landed(r, n);
		}
		k = frame_reader_advance(r);
		if (k != 0 || used == len)
			break;
	}
	*consumed = used;
	return k;
}

int frame_reader_fill(struct frame_reader *r, int fd)
{
	for (;;) {
		size_t want;
		uint8_t *slot;
		ssize_t n;
		int k;

		if (r->complete)
			return 1;
		slot = frame_reader_slot(r, &want);
		n = read(fd, slot, want);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return negative_errno();
		}
		if (n == 0)
			return (r->header_got == 0) ? -EPIPE : -ECONNRESET;
		frame_reader_landed(r, (size_t)n);
		k = frame_reader_advance(r);
		if (k < 0)
			return k;
	}
}

int frame_encode(const uint8_t *payload, size_t len, uint8_t **ret_frame, size_t *ret_len)
{
	_cleanup_free_ uint8_t *buf = NULL;

	if (len > FRAME_PAYLOAD_MAX)
		return -EMSGSIZE;
	buf = malloc(FRAME_HEADER_SIZE + len);
	if (!buf)
		return -ENOMEM;
	frame_header_encode((uint32_t)len, buf);
	if (len > 0)
		memcpy(buf + FRAME_HEADER_SIZE, payload, len);
	*ret_frame = move_ptr(buf);
	*ret_len = FRAME_HEADER_SIZE + len;
	return 0;
}

/* ---- the budgeted allocator ---------------------------------------------- */

static void *budget_alloc(void *data, size_t size)
{
	struct budget_allocator *a = data;
	void *p;

	if (size > a->budget - a->used) {
		a->exhausted = true;
		return NULL;
	}
	p = malloc(size ? size : 1);
	if (!p) {
		a->exhausted = true;
		return NULL;
	}
	a->used += size;
	return p;
}

static void budget_free(void *data, void *ptr)
{
	free(ptr);
}

void budget_allocator_init(struct budget_allocator *a, size_t budget)
{
	memset(a, 0, sizeof(*a));
	a->base.alloc = budget_alloc;
	a->base.free = budget_free;
	a->base.allocator_data = a;
	a->budget = budget;
}

/* An unpacked message freed when it leaves scope, with its allocator. */
struct unpacked {
	ProtobufCMessage *msg;
	ProtobufCAllocator *allocator;
};

static void unpacked_free(struct unpacked *u)
{
	if (u->msg)
		protobuf_c_message_free_unpacked(u->msg, u->allocator);
}
#define _cleanup_unpacked_ _cleanup_(unpacked_free)

/* ---- the envelope ------------------------------------------------------ */

static int pack_frame(const ProtobufCMessage *m, uint8_t **ret_frame, size_t *ret_len)
{
	_cleanup_free_ uint8_t *buf = NULL;
	size_t n = protobuf_c_message_get_packed_size(m);

	if (n > FRAME_PAYLOAD_MAX)
		return -EMSGSIZE;
	buf = malloc(FRAME_HEADER_SIZE + n);
	if (!buf)
		return -ENOMEM;
	frame_header_encode((uint32_t)n, buf);
	if (protobuf_c_message_pack(m, buf + FRAME_HEADER_SIZE) != n)
		return -EIO;
	*ret_frame = move_ptr(buf);
	*ret_len = FRAME_HEADER_SIZE + n;
	return 0;
}

/* Length of the valid UTF-8 sequence at s (at most avail bytes), 0 if none. */
static size_t utf8_sequence_len(const unsigned char *s, size_t avail)
{
	unsigned char c = s[0];
	size_t n;
	unsigned char lo = 0x80, hi = 0xbf; /* allowed range of the second byte */

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0; /* no overlong forms */
		else if (c == 0xed)
			hi = 0x9f; /* no surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f; /* nothing past U+10FFFF */
	} else
		return 0;
	if (avail < n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

/* wire_sanitize_message with the cut at max bytes (out holds max + 1). */
static void sanitize_cut(const char *in, size_t len, char *out, size_t max)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t i = 0, o = 0;

	while (i < len) {
		size_t n = utf8_sequence_len(s + i, len - i);

		if (n == 0) {
			n = 1;
			if (o + 1 > max)
				break;
			out[o++] = '?';
		} else if (n == 1) {
			if (o + 1 > max)
				break;
			out[o++] = (s[i] < 0x20 || s[i] == 0x7f) ? ' ' : (char)s[i];
		} else {
			if (o + n > max)
				break; /* never cut inside a character */
			memcpy(out + o, s + i, n);
			o += n;
		}
		i += n;
	}
	out[o] = '\0';
}

void wire_sanitize_message(const char *in, size_t len, char out[static AGENT_MESSAGE_MAX + 1])
{
	sanitize_cut(in, len, out, AGENT_MESSAGE_MAX);
}

void wire_sanitize_rule(const char *in, size_t len, char out[static AGENT_RULE_MAX + 1])
{
	sanitize_cut(in, len, out, AGENT_RULE_MAX);
}

int wire_encode_request(const char *method, uint8_t **ret_frame, size_t *ret_len)
{
	Vfhealth__Request req = VFHEALTH__REQUEST__INIT;

	if (!method || strnlen(method, WIRE_METHOD_MAX + 1) > WIRE_METHOD_MAX)
		return -EINVAL;
	/* Every method we have takes an empty request message, which packs to
	 * zero bytes: the payload is empty. */
	req.method = (char *)method;
	return pack_frame(&req.base, ret_frame, ret_len);
}

int wire_decode_request(const uint8_t *buf, size_t len, struct wire_request *ret)
{
	struct budget_allocator a;
	struct wire_request out = { 0 };
	size_t method_len;

	budget_allocator_init(&a, WIRE_UNPACK_BUDGET);
	_cleanup_unpacked_ struct unpacked req = {
		(ProtobufCMessage *)vfhealth__request__unpack(&a.base, len, buf), &a.base
	};
	if (!req.msg)
		return a.exhausted ? -ENOMEM : -EPROTO;
	const Vfhealth__Request *r = (const Vfhealth__Request *)req.msg;

	method_len = strlen(r->method);
	if (method_len > WIRE_METHOD_MAX)
		out.method_too_long = true;
	else
		memcpy(out.method, r->method, method_len + 1);

	if (strcmp(out.method, WIRE_METHOD_GET_GPU_INIT_STATUS) == 0) {
		_cleanup_unpacked_ struct unpacked inner = {
			(ProtobufCMessage *)vfhealth__get_gpuinit_status_request__unpack(
				&a.base, r->payload.len, r->payload.data),
			&a.base
		};
		if (!inner.msg)
			return a.exhausted ? -ENOMEM : -EPROTO;
	}
	*ret = out;
	return 0;
}

static Vfhealth__GPUInitState state_to_wire(enum gpu_init_state s)
{
	switch (s) {
	case GPU_INIT_OK:
		return VFHEALTH__GPUINIT_STATE__GPU_INIT_STATE_OK;
	case GPU_INIT_FAILED:
		return VFHEALTH__GPUINIT_STATE__GPU_INIT_STATE_FAILED;
	case GPU_INIT_UNKNOWN:
	default:
		return VFHEALTH__GPUINIT_STATE__GPU_INIT_STATE_UNKNOWN;
	}
}

int wire_encode_status_response(const struct agent_status *st, uint8_t **ret_frame, size_t *ret_len)
{
	Vfhealth__GetGPUInitStatusResponse inner = VFHEALTH__GET_GPUINIT_STATUS_RESPONSE__INIT;
	Vfhealth__AgentTelemetry telemetry = VFHEALTH__AGENT_TELEMETRY__INIT;
	Vfhealth__Response resp = VFHEALTH__RESPONSE__INIT;
	char message[AGENT_MESSAGE_MAX + 1], rule[AGENT_RULE_MAX + 1];
	char version[AGENT_VERSION_MAX + 1];
	/* four tags, their varints, the message and the rule, the telemetry
	 * (six tags, five varints of at most 10 bytes, the version): always fits */
	uint8_t inner_buf[AGENT_MESSAGE_MAX + AGENT_RULE_MAX + AGENT_VERSION_MAX + 112];
	size_t inner_len;

	wire_sanitize_message(st->message, strnlen(st->message, sizeof(st->message)), message);
	wire_sanitize_rule(st->rule, strnlen(st->rule, sizeof(st->rule)), rule);
	inner.state = state_to_wire(st->state);
	inner.failure_message = message;
	inner.failure_rule = rule;
	/* Only UNKNOWN has a reason; the table's positions are the wire values. */
	if (st->state == GPU_INIT_UNKNOWN && (unsigned)st->reason < AGENT_REASON_COUNT)
		inner.unknown_reason = (Vfhealth__UnknownReason)st->reason;
	if (st->telemetry.present) {
		wire_sanitize_version(st->telemetry.version, version);
		telemetry.agent_version = version;
		telemetry.kmsg_records_lost = st->telemetry.kmsg_records_lost;
		telemetry.kmsg_overruns = st->telemetry.kmsg_overruns;
		telemetry.probe_attempts = st->telemetry.probe_attempts;
		telemetry.probe_timeouts = st->telemetry.probe_timeouts;
		telemetry.probe_last_exit_status = st->telemetry.probe_last_exit_status;
		inner.telemetry = &telemetry;
	}
	inner_len = vfhealth__get_gpuinit_status_response__get_packed_size(&inner);
	if (inner_len > sizeof(inner_buf))
		return -EMSGSIZE;
	vfhealth__get_gpuinit_status_response__pack(&inner, inner_buf);

	resp.status = VFHEALTH__RESPONSE__STATUS__OK;
	resp.payload.data = inner_buf;
	resp.payload.len = inner_len;
	return pack_frame(&resp.base, ret_frame, ret_len);
}

int wire_encode_error_response(enum wire_status status, const char *error, uint8_t **ret_frame,
			       size_t *ret_len)
{
	Vfhealth__Response resp = VFHEALTH__RESPONSE__INIT;
	char message[AGENT_MESSAGE_MAX + 1];

	switch (status) {
	case WIRE_STATUS_UNIMPLEMENTED:
		resp.status = VFHEALTH__RESPONSE__STATUS__UNIMPLEMENTED;
		break;
	case WIRE_STATUS_ERROR:
		resp.status = VFHEALTH__RESPONSE__STATUS__ERROR;
		break;
	case WIRE_STATUS_OK:
	default:
		return -EINVAL;
	}
	wire_sanitize_message(error ? error : "", error ? strlen(error) : 0, message);
	resp.error = message;
	return pack_frame(&resp.base, ret_frame, ret_len);
}

int wire_decode_status_response(const uint8_t *buf, size_t len, struct agent_status *ret)
{
	struct budget_allocator a;
	struct agent_status out = { 0 };

	budget_allocator_init(&a, WIRE_UNPACK_BUDGET);
	_cleanup_unpacked_ struct unpacked resp = {
		(ProtobufCMessage *)vfhealth__response__unpack(&a.base, len, buf), &a.base
	};
	if (!resp.msg)
		return -EPROTO;
	const Vfhealth__Response *r = (const Vfhealth__Response *)resp.msg;

	switch ((int)r->status) {
	case VFHEALTH__RESPONSE__STATUS__OK:
		break;
	case VFHEALTH__RESPONSE__STATUS__UNIMPLEMENTED:
		return -EOPNOTSUPP;
	default: /* ERROR means our request was wrong: a protocol mismatch */
		return -EPROTO;
	}

	_cleanup_unpacked_ struct unpacked inner = {
		(ProtobufCMessage *)vfhealth__get_gpuinit_status_response__unpack(&a.base,
										  r->payload.len,
										  r->payload.data),
		&a.base
	};
	if (!inner.msg)
		return -EPROTO;
	const Vfhealth__GetGPUInitStatusResponse *st =
		(const Vfhealth__GetGPUInitStatusResponse *)inner.msg;

	switch ((int)st->state) {
	case VFHEALTH__GPUINIT_STATE__GPU_INIT_STATE_UNKNOWN:
		out.state = GPU_INIT_UNKNOWN;
		break;
	case VFHEALTH__GPUINIT_STATE__GPU_INIT_STATE_OK:
		out.state = GPU_INIT_OK;
		break;
	case VFHEALTH__GPUINIT_STATE__GPU_INIT_STATE_FAILED:
		out.state = GPU_INIT_FAILED;
		break;
	default:
		return -EPROTO;
	}
	wire_sanitize_message(st->failure_message, strlen(st->failure_message), out.message);
	wire_sanitize_rule(st->failure_rule, strlen(st->failure_rule), out.rule);
	/* Open enum: a reason this host does not know (a newer agent) is
	 * unspecified, not a protocol error. */
	if (out.state == GPU_INIT_UNKNOWN && (unsigned)st->unknown_reason < AGENT_REASON_COUNT)
		out.reason = (enum agent_unknown_reason)st->unknown_reason;
	if (st->telemetry) {
		const Vfhealth__AgentTelemetry *t = st->telemetry;

		out.telemetry.present = true;
		wire_sanitize_version(t->agent_version, out.telemetry.version);
		out.telemetry.kmsg_records_lost = t->kmsg_records_lost;
		out.telemetry.kmsg_overruns = t->kmsg_overruns;
		out.telemetry.probe_attempts = t->probe_attempts;
		out.telemetry.probe_timeouts = t->probe_timeouts;
		/* an exit status is -1 (none) or 0..255+128 */
		out.telemetry.probe_last_exit_status =
			t->probe_last_exit_status < -1 || t->probe_last_exit_status > 255 + 128 ?
				-1 :
				t->probe_last_exit_status;
	}
	*ret = out;
	return 0;
}

/* ---- blocking with a deadline -------------------------------------------- */

/* Milliseconds until deadline for poll(), rounded up so we never wake early
 * and spin; 0 when it has passed. */
static int ms_until(int64_t deadline_ns)
{
	int64_t left = deadline_ns - monotonic_ns();

	if (left <= 0)
		return 0;
	left = (left + 999999) / 1000000;
	return left > INT_MAX ? INT_MAX : (int)left;
}

int fd_wait(int fd, short events, int64_t deadline_ns, int cancel_fd)
{
	struct pollfd p[2] = {
		{ .fd = fd, .events = events },
		{ .fd = cancel_fd, .events = POLLIN },
	};
	nfds_t n = cancel_fd >= 0 ? 2 : 1;

	for (;;) {
		int timeout = ms_until(deadline_ns);
		int k;

		if (timeout == 0 && monotonic_ns() >= deadline_ns) {
			/* one last non-blocking look: ready beats late */
			k = poll(p, n, 0);
			if (k > 0 && n == 2 && p[1].revents)
				return -ECANCELED;
			if (k > 0 && p[0].revents)
				return 0;
			return -ETIMEDOUT;
		}
		k = poll(p, n, timeout);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (n == 2 && p[1].revents)
			return -ECANCELED;
		if (p[0].revents)
			return 0;
	}
}

int fd_write_all(int fd, const void *buf, size_t len, int64_t deadline_ns, int cancel_fd)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == ENOTSOCK)
			n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				int k = fd_wait(fd, POLLOUT, deadline_ns, cancel_fd);
				if (k < 0)
					return k;
				continue;
			}
			return negative_errno();
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int frame_recv(int fd, struct frame_reader *r, int64_t deadline_ns, int cancel_fd)
{
	for (;;) {
		int k = frame_reader_fill(r, fd);
		if (k == 1)
			return 0;
		if (k == -EPIPE)
			return -ECONNRESET;
		if (k < 0)
			return k;
		k = fd_wait(fd, POLLIN, deadline_ns, cancel_fd);
		if (k < 0)
			return k;
	}
}
