/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the automatic recovery policy (recovery/auto.c): which
 * GPU is drained, when the drained one is cycled, one at a time, never a
 * failed GPU, no GPU held back by one waiting for its VMs, an automatic
 * drain's deadline, and which quarantines count after an undrain.  Pure
 * functions: tables in, one step out.
 */
#include <check.h>
#include <stdio.h>

#include "recovery/recovery-internal.h"
#include "tests/common/check-main.h"

#define A "0000:41:00.0"
#define B "0000:42:00.0"
#define S INT64_C(1000000000)

static struct auto_step step(struct auto_gpu *g, size_t n, int threshold)
{
	struct auto_policy p = { .threshold = threshold };
	return auto_next(g, n, &p);
}

static struct auto_step step_timeout(struct auto_gpu *g, size_t n, int threshold,
				     int64_t timeout_ns)
{
	struct auto_policy p = { .threshold = threshold, .drain_timeout_ns = timeout_ns };
	return auto_next(g, n, &p);
}

/* The step CALL returns: ACTION on the GPU at INDEX. */
#define expect_step(call, action_, index_)                \
	do {                                              \
		struct auto_step got_ = (call);           \
		ck_assert_int_eq(got_.action, (action_)); \
		ck_assert_uint_eq(got_.index, (index_));  \
	} while (0)

START_TEST(test_off_and_below)
{
	struct auto_gpu g[] = { { A, STORE_GPU_SERVING, 5, false } };

	ck_assert_int_eq(step(g, 1, 0).action, AUTO_NOTHING); /* off */
	ck_assert_int_eq(step(g, 1, 6).action, AUTO_NOTHING); /* below */
	expect_step(step(g, 1, 5), AUTO_DRAIN, 0);
}
END_TEST

/* The first serving GPU with enough fresh quarantines; never a failed one
 * (no automatic retry), nor one an operator drained. */
START_TEST(test_which_gpu)
{
	struct auto_gpu g[] = { { A, STORE_GPU_FAILED, 9, false },
				{ B, STORE_GPU_SERVING, 2, false } };

	expect_step(step(g, 2, 2), AUTO_DRAIN, 1);
	g[1].state = STORE_GPU_DRAINED; /* drained by the operator: not the policy's */
	ck_assert_int_eq(step(g, 2, 2).action, AUTO_NOTHING);
	g[0].state = STORE_GPU_SERVING;
	g[0].fresh_quarantines = 1;
	ck_assert_int_eq(step(g, 2, 2).action, AUTO_NOTHING);
}
END_TEST

/* Its own drain: cycled once drained, waited for while draining. */
START_TEST(test_drained_then_cycle)
{
	struct auto_gpu g[] = { { A, STORE_GPU_DRAINING, 2, true } };

	ck_assert_int_eq(step(g, 1, 2).action, AUTO_NOTHING);
	g[0].state = STORE_GPU_DRAINED;
	expect_step(step(g, 1, 2), AUTO_CYCLE, 0);
	struct auto_policy observe = { .threshold = 2, .observe = true };
	ck_assert_int_eq(auto_next(g, 1, &observe).action, AUTO_NOTHING);
}
END_TEST

/* A GPU waiting for its VMs holds back no other GPU: B is drained and
 * cycled while A still drains; then A's cycle, once its VMs left. */
START_TEST(test_waiting_holds_back_nothing)
{
	struct auto_gpu g[] = { { A, STORE_GPU_DRAINING, 2, true },
				{ B, STORE_GPU_SERVING, 3, false } };

	expect_step(step(g, 2, 2), AUTO_DRAIN, 1);
	g[1] = (struct auto_gpu){ B, STORE_GPU_DRAINED, 3, true };
	expect_step(step(g, 2, 2), AUTO_CYCLE, 1);
	g[1].state = STORE_GPU_RECOVERING;
	g[0].state = STORE_GPU_DRAINED; /* one cycle at a time */
	ck_assert_int_eq(step(g, 2, 2).action, AUTO_NOTHING);
	g[1] = (struct auto_gpu){ B, STORE_GPU_SERVING, 0, false };
	expect_step(step(g, 2, 2), AUTO_CYCLE, 0);
}
END_TEST

/* An automatic drain ends at its deadline: while its VMs stay, or while it
 * waits behind another GPU's cycle; not before, never with no deadline,
 * never an operator's drain, also with auto_recover off.  The nearest
 * deadline is what the thread waits for. */
START_TEST(test_drain_timeout)
{
	struct auto_gpu g[] = { { A, STORE_GPU_DRAINING, 2, true, 10 * S - 1 },
				{ B, STORE_GPU_DRAINING, 2, true, 4 * S } };

	struct auto_step s = step_timeout(g, 2, 2, 10 * S);
	ck_assert_int_eq(s.action, AUTO_NOTHING);
	ck_assert_int_eq(s.wait_ns, 1);              /* A's, the nearest */
	ck_assert_int_eq(step(g, 2, 2).wait_ns, -1); /* no deadline */
	g[0].drained_ns = 10 * S;
	s = step_timeout(g, 2, 2, 10 * S);
	ck_assert_int_eq(s.action, AUTO_UNDRAIN);
	ck_assert_uint_eq(s.index, 0);
	ck_assert_int_eq(s.wait_ns, 6 * S);                                   /* B's, still ahead */
	ck_assert_int_eq(step_timeout(g, 2, 0, 10 * S).action, AUTO_UNDRAIN); /* off */
	ck_assert_int_eq(step(g, 2, 2).action, AUTO_NOTHING);
	g[0].auto_drained = false; /* the operator's drain has no deadline */
	s = step_timeout(g, 2, 2, 10 * S);
	ck_assert_int_eq(s.action, AUTO_NOTHING);
	ck_assert_int_eq(s.wait_ns, 6 * S);

	/* drained: cycled when it can, else ended behind another's cycle */
	g[0] = (struct auto_gpu){ A, STORE_GPU_DRAINED, 2, true, 11 * S };
	g[1] = (struct auto_gpu){ B, STORE_GPU_SERVING, 0, false };
	ck_assert_int_eq(step_timeout(g, 2, 2, 10 * S).action, AUTO_CYCLE);
	g[1].state = STORE_GPU_RECOVERING;
	expect_step(step_timeout(g, 2, 2, 10 * S), AUTO_UNDRAIN, 0);
	/* a failed GPU waits for an operator; a clock set back is no time */
	g[0].state = STORE_GPU_FAILED;
	ck_assert_int_eq(step_timeout(g, 2, 2, 10 * S).action, AUTO_NOTHING);
	g[0] = (struct auto_gpu){ A, STORE_GPU_DRAINING, 2, true, -5 * S };
	s = step_timeout(g, 2, 2, 10 * S);
	ck_assert_int_eq(s.action, AUTO_NOTHING);
	ck_assert_int_eq(s.wait_ns, 10 * S);
}
END_TEST

static struct store_gpu_event ev(const char *at, const char *event, const char *detail)
{
	struct store_gpu_event e = { .by = -1 };

	snprintf(e.at, sizeof(e.at), "%s", at);
	snprintf(e.event, sizeof(e.event), "%s", event);
	snprintf(e.detail, sizeof(e.detail), "%s", detail);
	return e;
}

/* The newest drain says whose it is and when it began (to the
 * nanosecond); counting starts after the later of the last cycle's start
 * and the last undrain. */
START_TEST(test_history_facts)
{
	struct store_gpu_event h[] = {
		ev("2026-12-01T10:00:00.000000000Z", "drain", "auto: 2 VFs out of service"),
		ev("2026-12-01T10:00:01.000000000Z", "recover", ""),
		ev("2026-12-01T10:00:02.000000000Z", "recovered", "took 1.0 s"),
		ev("2026-12-01T11:00:00.000000000Z", "drain", ""),
		ev("2026-12-01T11:00:05.000000000Z", "undrain", ""),
		ev("2026-12-01T12:00:00.250000000Z", "drain", "auto: 3 VFs out of service"),
	};
	struct auto_history f;

	auto_history_read(h, 0, &f);
	ck_assert(!f.auto_drain);
	ck_assert_int_eq(f.drained_at_ns, -1);
	ck_assert_str_eq(f.counts_after, "");
	ck_assert(auto_counts(&f, "2026-01-01T00:00:00.000000000Z"));

	auto_history_read(h, 3, &f); /* an automatic drain and its cycle */
	ck_assert(f.auto_drain);
	ck_assert_str_eq(f.counts_after, "2026-12-01T10:00:01.000000000Z");
	auto_history_read(h, 4, &f); /* the operator's drain */
	ck_assert(!f.auto_drain);
	auto_history_read(h, 6, &f);
	ck_assert(f.auto_drain);
	ck_assert_int_eq(f.drained_at_ns, INT64_C(1796126400) * S + 250000000);
	ck_assert_str_eq(f.counts_after, "2026-12-01T11:00:05.000000000Z");
}
END_TEST

/* An operator's undrain of an automatic drain stands: the quarantines
 * from before it never count again, one after it does.  The same for the
 * undrain a drain's deadline makes. */
START_TEST(test_undrain_stands)
{
	struct store_gpu_event h[] = {
		ev("2026-12-01T10:00:00.000000000Z", "drain", "auto: 2 VFs out of service"),
		ev("2026-12-01T10:00:00.500000000Z", "undrain", ""),
	};
	const char *before[] = { "2026-12-01T09:59:00.000000000Z",
				 "2026-12-01T10:00:00.400000000Z" };
	const char *after = "2026-12-01T10:00:00.500000001Z";
	struct auto_history f;

	for (size_t timeout = 0; timeout < 2; timeout++) {
		if (timeout)
			h[1] = ev("2026-12-02T10:00:00.500000000Z", "undrain",
				  "auto: the drain timed out after 86400 s");
		auto_history_read(h, 2, &f);
		for (size_t i = 0; i < 2; i++)
			ck_assert(!auto_counts(&f, before[i]));
		ck_assert(!auto_counts(&f, h[1].at)); /* the same instant is not after */
		ck_assert(auto_counts(&f, timeout ? "2026-12-02T10:00:01.000000000Z" : after));
	}
	/* so the policy leaves the undrained GPU serving */
	struct auto_gpu g[] = { { A, STORE_GPU_SERVING, 0, false } };
	for (size_t i = 0; i < 2; i++)
		g[0].fresh_quarantines += auto_counts(&f, before[i]);
	ck_assert_int_eq(step(g, 1, 2).action, AUTO_NOTHING);
}
END_TEST

/* One GPU at a time, whoever started the cycle. */
START_TEST(test_one_at_a_time)
{
	struct auto_gpu g[] = { { A, STORE_GPU_RECOVERING, 0, false },
				{ B, STORE_GPU_SERVING, 3, false } };

	ck_assert_int_eq(step(g, 2, 2).action, AUTO_NOTHING);
	g[0].state = STORE_GPU_SERVING;
	ck_assert_int_eq(step(g, 2, 2).action, AUTO_DRAIN);
}
END_TEST

static const struct check_case auto_case = { .suite = "recovery-auto",
					     .tcase = "auto",
					     .timeout = 30 };
CHECK_CASE_MAIN(auto_case, test_off_and_below, test_which_gpu, test_drained_then_cycle,
		test_waiting_holds_back_nothing, test_drain_timeout, test_history_facts,
		test_undrain_stands, test_one_at_a_time)
