/* SPDX-License-Identifier: MIT */
/*
 * check-main.h - the one main() of every Check suite.
 *
 *   static Suite *kmsg_suite(void) { ... }
 *   CHECK_MAIN(kmsg_suite)
 *
 * Runs the suite (Check honours CK_RUN_CASE and CK_RUN_SUITE, which the
 * meson files use to register one case per test) and exits non-zero when
 * any test failed.
 */
#ifndef VFHEALTH_CHECK_MAIN_H
#define VFHEALTH_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

static inline int check_run_suite(Suite *suite)
{
	SRunner *sr = srunner_create(suite);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#define CHECK_MAIN(suite_fn)                           \
	int main(void)                                 \
	{                                              \
		return check_run_suite(suite_fn());    \
	}

#endif
