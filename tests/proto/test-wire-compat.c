/* SPDX-License-Identifier: MIT */
/* Old and new peers on the wire: guest.proto as first released (guest-v1.proto,
 * without unknown_reason and failure_rule) against today's codec.  An old
 * agent's answer decodes with an unspecified reason and no rule; an old host
 * reads a new agent's answer (state and message) and skips the new fields; a
 * reason this host does not know (a newer agent) is unspecified, not an
 * error; a reason is sent only with UNKNOWN.  Telemetry: an old
 * agent's answer has none, an old host skips it, a new pair carries it with
 * the version cut to label-safe bytes and an impossible exit status as none. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "guest-v1.pb-c.h"
#include "common/cleanup.h"
#include "proto/frame.h"
#include "proto/guest.pb-c.h"
#include "tests/common/check-main.h"

#define LINE "NVRM: GPU 0000:41:00.4: RmInitAdapter failed! (0x22:0x38:891)"

/* An old agent's Response to GetGPUInitStatus, packed by the v1 code. */
static size_t old_agent_answer(Vfhealth__V1__GPUInitState state, const char *message, uint8_t *out)
{
	Vfhealth__V1__GetGPUInitStatusResponse inner =
		VFHEALTH__V1__GET_GPUINIT_STATUS_RESPONSE__INIT;
	Vfhealth__V1__Response resp = VFHEALTH__V1__RESPONSE__INIT;
	uint8_t inner_buf[2048];

	inner.state = state;
	inner.failure_message = (char *)message;
	ck_assert_uint_le(vfhealth__v1__get_gpuinit_status_response__get_packed_size(&inner),
			  sizeof(inner_buf));
	resp.status = VFHEALTH__V1__RESPONSE__STATUS__OK;
	resp.payload.data = inner_buf;
	resp.payload.len = vfhealth__v1__get_gpuinit_status_response__pack(&inner, inner_buf);
	return vfhealth__v1__response__pack(&resp, out);
}

START_TEST(test_old_agent_new_host)
{
	uint8_t buf[4096];
	struct agent_status st;
	size_t n;

	n = old_agent_answer(VFHEALTH__V1__GPUINIT_STATE__GPU_INIT_STATE_UNKNOWN, "", buf);
	memset(&st, 0x5a, sizeof(st));
	ck_assert_int_eq(wire_decode_status_response(buf, n, &st), 0);
	ck_assert_int_eq(st.state, GPU_INIT_UNKNOWN);
	ck_assert_int_eq(st.reason, AGENT_REASON_UNSPECIFIED);
	ck_assert_str_eq(st.rule, "");
	ck_assert(!st.telemetry.present);

	n = old_agent_answer(VFHEALTH__V1__GPUINIT_STATE__GPU_INIT_STATE_FAILED, LINE, buf);
	ck_assert_int_eq(wire_decode_status_response(buf, n, &st), 0);
	ck_assert_int_eq(st.state, GPU_INIT_FAILED);
	ck_assert_str_eq(st.message, LINE);
	ck_assert_str_eq(st.rule, "");
}
END_TEST

/* Decode a new agent's frame with the v1 code, as an old host does. */
static void old_host_reads(const struct agent_status *in, Vfhealth__V1__GPUInitState want_state,
			   const char *want_message)
{
	_cleanup_free_ uint8_t *frame = NULL;
	Vfhealth__V1__Response *resp;
	Vfhealth__V1__GetGPUInitStatusResponse *inner;
	size_t len;

	ck_assert_int_eq(wire_encode_status_response(in, &frame, &len), 0);
	resp = vfhealth__v1__response__unpack(NULL, len - 4, frame + 4);
	ck_assert_ptr_nonnull(resp);
	ck_assert_int_eq(resp->status, VFHEALTH__V1__RESPONSE__STATUS__OK);
	inner = vfhealth__v1__get_gpuinit_status_response__unpack(NULL, resp->payload.len,
								  resp->payload.data);
	ck_assert_ptr_nonnull(inner);
	ck_assert_int_eq(inner->state, want_state);
	ck_assert_str_eq(inner->failure_message, want_message);
	vfhealth__v1__get_gpuinit_status_response__free_unpacked(inner, NULL);
	vfhealth__v1__response__free_unpacked(resp, NULL);
}

START_TEST(test_new_agent_old_host)
{
	struct agent_status in = { .state = GPU_INIT_UNKNOWN, .reason = AGENT_REASON_BACKING_OFF };

	old_host_reads(&in, VFHEALTH__V1__GPUINIT_STATE__GPU_INIT_STATE_UNKNOWN, "");
	in.state = GPU_INIT_FAILED;
	strcpy(in.message, LINE);
	strcpy(in.rule, "RmInitAdapter failed!");
	old_host_reads(&in, VFHEALTH__V1__GPUINIT_STATE__GPU_INIT_STATE_FAILED, LINE);
	in.telemetry = (struct agent_telemetry){ .present = true,
						 .version = "0.2.0",
						 .kmsg_records_lost = 7,
						 .probe_attempts = 3,
						 .probe_timeouts = 1,
						 .probe_last_exit_status = 137 };
	old_host_reads(&in, VFHEALTH__V1__GPUINIT_STATE__GPU_INIT_STATE_FAILED, LINE);
}
END_TEST

START_TEST(test_telemetry_new_pair)
{
	_cleanup_free_ uint8_t *frame = NULL;
	struct agent_status in = { .state = GPU_INIT_OK }, out;
	size_t len;

	in.telemetry = (struct agent_telemetry){ .present = true,
						 .version = "1.2.3~rc1+g00d",
						 .kmsg_records_lost = UINT64_MAX,
						 .kmsg_overruns = 2,
						 .probe_attempts = 40,
						 .probe_timeouts = 3,
						 .probe_last_exit_status = -1 };
	ck_assert_int_eq(wire_encode_status_response(&in, &frame, &len), 0);
	memset(&out, 0x5a, sizeof(out));
	ck_assert_int_eq(wire_decode_status_response(frame + 4, len - 4, &out), 0);
	ck_assert(out.telemetry.present);
	ck_assert_str_eq(out.telemetry.version, "1.2.3~rc1+g00d");
	ck_assert_uint_eq(out.telemetry.kmsg_records_lost, UINT64_MAX);
	ck_assert_uint_eq(out.telemetry.kmsg_overruns, 2);
	ck_assert_uint_eq(out.telemetry.probe_attempts, 40);
	ck_assert_uint_eq(out.telemetry.probe_timeouts, 3);
	ck_assert_int_eq(out.telemetry.probe_last_exit_status, -1);
}
END_TEST

/* A hostile agent's telemetry: the version becomes label-safe and is cut,
 * an exit status no process can have reads as none. */
START_TEST(test_telemetry_hostile)
{
	Vfhealth__GetGPUInitStatusResponse inner = VFHEALTH__GET_GPUINIT_STATUS_RESPONSE__INIT;
	Vfhealth__AgentTelemetry t = VFHEALTH__AGENT_TELEMETRY__INIT;
	Vfhealth__Response resp = VFHEALTH__RESPONSE__INIT;
	char version[300];
	uint8_t inner_buf[1024], buf[2048];
	struct agent_status st;
	size_t n;

	memset(version, 'v', sizeof(version) - 1);
	version[sizeof(version) - 1] = '\0';
	memcpy(version, "1\"}\n{x=\\", 8);
	t.agent_version = version;
	t.probe_last_exit_status = -5;
	inner.state = VFHEALTH__GPUINIT_STATE__GPU_INIT_STATE_OK;
	inner.telemetry = &t;
	resp.status = VFHEALTH__RESPONSE__STATUS__OK;
	resp.payload.data = inner_buf;
	resp.payload.len = vfhealth__get_gpuinit_status_response__pack(&inner, inner_buf);
	n = vfhealth__response__pack(&resp, buf);
	ck_assert_int_eq(wire_decode_status_response(buf, n, &st), 0);
	ck_assert(st.telemetry.present);
	ck_assert_uint_eq(strlen(st.telemetry.version), AGENT_VERSION_MAX);
	ck_assert_int_eq(strncmp(st.telemetry.version, "1____x__vvv", 11), 0);
	ck_assert_int_eq(st.telemetry.probe_last_exit_status, -1);
	t.probe_last_exit_status = 255 + 128 + 1;
	resp.payload.len = vfhealth__get_gpuinit_status_response__pack(&inner, inner_buf);
	n = vfhealth__response__pack(&resp, buf);
	ck_assert_int_eq(wire_decode_status_response(buf, n, &st), 0);
	ck_assert_int_eq(st.telemetry.probe_last_exit_status, -1);
}
END_TEST

START_TEST(test_new_agent_new_host)
{
	_cleanup_free_ uint8_t *frame = NULL;
	struct agent_status in = { .state = GPU_INIT_UNKNOWN }, out;
	size_t len;

	for (int r = 0; r < AGENT_REASON_COUNT; r++) {
		in.reason = (enum agent_unknown_reason)r;
		ck_assert_int_eq(wire_encode_status_response(&in, &frame, &len), 0);
		ck_assert_int_eq(wire_decode_status_response(frame + 4, len - 4, &out), 0);
		ck_assert_int_eq(out.reason, r);
		free(frame);
		frame = NULL;
	}
	/* a reason goes only with UNKNOWN; the rule comes back with FAILED */
	in.state = GPU_INIT_FAILED;
	in.reason = AGENT_REASON_PROBING;
	strcpy(in.message, LINE);
	strcpy(in.rule, "GSP firmware init failed");
	ck_assert_int_eq(wire_encode_status_response(&in, &frame, &len), 0);
	ck_assert_int_eq(wire_decode_status_response(frame + 4, len - 4, &out), 0);
	ck_assert_int_eq(out.reason, AGENT_REASON_UNSPECIFIED);
	ck_assert_str_eq(out.rule, "GSP firmware init failed");
	ck_assert_str_eq(out.message, LINE);
}
END_TEST

START_TEST(test_newer_agent_reason)
{
	Vfhealth__GetGPUInitStatusResponse inner = VFHEALTH__GET_GPUINIT_STATUS_RESPONSE__INIT;
	Vfhealth__Response resp = VFHEALTH__RESPONSE__INIT;
	uint8_t inner_buf[256], buf[512];
	struct agent_status st;
	size_t n;

	inner.state = VFHEALTH__GPUINIT_STATE__GPU_INIT_STATE_UNKNOWN;
	inner.unknown_reason = (Vfhealth__UnknownReason)99; /* not in this host's table */
	resp.status = VFHEALTH__RESPONSE__STATUS__OK;
	resp.payload.data = inner_buf;
	resp.payload.len = vfhealth__get_gpuinit_status_response__pack(&inner, inner_buf);
	n = vfhealth__response__pack(&resp, buf);
	ck_assert_int_eq(wire_decode_status_response(buf, n, &st), 0);
	ck_assert_int_eq(st.state, GPU_INIT_UNKNOWN);
	ck_assert_int_eq(st.reason, AGENT_REASON_UNSPECIFIED);
	ck_assert_str_eq(agent_unknown_reason_name((enum agent_unknown_reason)99), "unspecified");
	ck_assert_str_eq(agent_unknown_reason_name(AGENT_REASON_BACKING_OFF), "backing_off");
}
END_TEST

static Suite *compat_suite(void)
{
	Suite *s = suite_create("wire-compat");
	TCase *tc = check_tcase("core", 30);

	tcase_add_test(tc, test_old_agent_new_host);
	tcase_add_test(tc, test_new_agent_old_host);
	tcase_add_test(tc, test_new_agent_new_host);
	tcase_add_test(tc, test_newer_agent_reason);
	tcase_add_test(tc, test_telemetry_new_pair);
	tcase_add_test(tc, test_telemetry_hostile);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(compat_suite)
