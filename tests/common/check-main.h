/* SPDX-License-Identifier: MIT */
/*
 * check-main.h - the one main() of every Check suite.
 *
 *   static Suite *kmsg_suite(void) { ... }
 *   CHECK_MAIN(kmsg_suite)
 *
 * or, for a suite of one test case, from its list of tests:
 *
 *   static const struct check_case kmsg_case = { .suite = "kmsg", .tcase = "core",
 *                                                .timeout = 30 };
 *   CHECK_CASE_MAIN(kmsg_case, test_parse_fields, test_facility_rules)
 *
 * Runs the suite (Check honours CK_RUN_CASE and CK_RUN_SUITE, which the
 * meson files use to register one case per test) and exits non-zero when
 * any test failed.
 */
#ifndef VFHEALTH_CHECK_MAIN_H
#define VFHEALTH_CHECK_MAIN_H

#include <check.h>
#include <stdio.h>
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

/* A test case with its own timeout in seconds, the only way the tests make
 * one (tests/ops/style.sh refuses a bare tcase_create): Check's default,
 * 4 s a test, fails good tests on a busy 2-core machine.  Under valgrind
 * the tests run unforked (CK_FORK=no), where meson's timeout applies. */
static inline TCase *check_tcase(const char *name, double timeout)
{
	TCase *tc = tcase_create(name);

	tcase_set_timeout(tc, timeout);
	return tc;
}

/* A suite of one test case. */
struct check_case {
	const char *suite;
	const char *tcase;
	double timeout;       /* seconds, required (check_tcase) */
	SFun setup, teardown; /* a checked fixture (around each test); NULL: none */
};

static inline Suite *check_case_suite(const struct check_case *c, const TTest *const *tests,
				      size_t n)
{
	Suite *s = suite_create(c->suite);
	TCase *tc;

	if (!(c->timeout > 0)) {
		fprintf(stderr, "%s: the test case states no timeout\n", c->suite);
		abort();
	}
	tc = check_tcase(c->tcase, c->timeout);
	if (c->setup || c->teardown)
		tcase_add_checked_fixture(tc, c->setup, c->teardown);
	for (size_t i = 0; i < n; i++)
		tcase_add_test(tc, tests[i]);
	suite_add_tcase(s, tc);
	return s;
}

#define CHECK_CASE_MAIN(check_case, ...)                                                      \
	int main(void)                                                                        \
	{                                                                                     \
		const TTest *const tests_[] = { __VA_ARGS__ };                                \
		return check_run_suite(check_case_suite(&(check_case), tests_,                \
							sizeof(tests_) / sizeof(tests_[0]))); \
	}

#define CHECK_MAIN(suite_fn)                        \
	int main(void)                              \
	{                                           \
		return check_run_suite(suite_fn()); \
	}

#endif
