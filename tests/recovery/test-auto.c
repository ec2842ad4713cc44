/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the automatic recovery policy (recovery/auto.c): which
 * GPU is drained, when the drained one is cycled, one at a time, and never
 * a failed GPU.  A pure function: tables in, one step out.
 */
#include <check.h>

#include "recovery/recovery-internal.h"
#include "tests/common/check-main.h"

#define A "0000:41:00.0"
#define B "0000:42:00.0"

static struct auto_step step(struct auto_gpu *g, size_t n, int threshold)
{
	return auto_next(g, n, threshold);
}

START_TEST(test_off_and_below)
{
	struct auto_gpu g[] = { { A, STORE_GPU_SERVING, 5, false } };

	ck_assert_int_eq(step(g, 1, 0).action, AUTO_NOTHING); /* off */
	ck_assert_int_eq(step(g, 1, 6).action, AUTO_NOTHING); /* below */
	struct auto_step s = step(g, 1, 5);
	ck_assert_int_eq(s.action, AUTO_DRAIN);
	ck_assert_uint_eq(s.index, 0);
}
END_TEST

/* The first serving GPU with enough fresh quarantines; never a failed one
 * (no automatic retry), nor one an operator drained. */
START_TEST(test_which_gpu)
{
	struct auto_gpu g[] = { { A, STORE_GPU_FAILED, 9, false },
				{ B, STORE_GPU_SERVING, 2, false } };

	struct auto_step s = step(g, 2, 2);
	ck_assert_int_eq(s.action, AUTO_DRAIN);
	ck_assert_uint_eq(s.index, 1);
	g[1].state = STORE_GPU_DRAINED; /* drained by the operator: not the policy's */
	ck_assert_int_eq(step(g, 2, 2).action, AUTO_NOTHING);
	g[0].state = STORE_GPU_SERVING;
	g[0].fresh_quarantines = 1;
	ck_assert_int_eq(step(g, 2, 2).action, AUTO_NOTHING);
}
END_TEST

/* Its own drain: cycled once drained, waited for while draining; and
 * nothing else starts meanwhile. */
START_TEST(test_drained_then_cycle)
{
	struct auto_gpu g[] = { { A, STORE_GPU_DRAINING, 2, true },
				{ B, STORE_GPU_SERVING, 3, false } };

	ck_assert_int_eq(step(g, 2, 2).action, AUTO_NOTHING);
	g[0].state = STORE_GPU_DRAINED;
	struct auto_step s = step(g, 2, 2);
	ck_assert_int_eq(s.action, AUTO_CYCLE);
	ck_assert_uint_eq(s.index, 0);
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
		test_one_at_a_time)
