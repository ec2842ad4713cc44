/* SPDX-License-Identifier: MIT */
/*
 * test-prometheus.c - common/prometheus.c: a family's HELP and TYPE lines
 * once, then its samples with their labels in order; label values escape
 * backslash, double quote and line feed, HELP text backslash and line feed,
 * so that no value can end a label or a line early.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/prometheus.h"
#include "tests/common/check-main.h"

/* text: what the statements wrote to out, NUL-terminated (caller frees). */
#define RENDER(text, ...)                                   \
	do {                                                \
		size_t len_ = 0;                            \
		FILE *out = open_memstream(&(text), &len_); \
		ck_assert_ptr_nonnull(out);                 \
		__VA_ARGS__;                                \
		ck_assert_int_eq(fclose(out), 0);           \
	} while (0)

/* A family with labels: HELP and TYPE once, one line a sample, labels in
 * the order given, values as given. */
START_TEST(test_family_with_labels)
{
	_cleanup_free_ char *text = NULL;

	RENDER(text, {
		prom_family(out, "vfhealth_x_total", "counter", "Things, by kind.");
		prom_sample_u64(out, "vfhealth_x_total",
				PROM_LABELS({ "vf", "0000:41:00.4" }, { "kind", "a" }), 3);
		prom_sample_u64(out, "vfhealth_x_total",
				PROM_LABELS({ "vf", "0000:41:00.4" }, { "kind", "b" }), UINT64_MAX);
		prom_sample_i64(out, "vfhealth_x_total", PROM_LABELS({ "kind", "c" }), -7);
		prom_sample(out, "vfhealth_x_total", PROM_LABELS({ "kind", "d" }), "0.25");
	});
	ck_assert_str_eq(text, "# HELP vfhealth_x_total Things, by kind.\n"
			       "# TYPE vfhealth_x_total counter\n"
			       "vfhealth_x_total{vf=\"0000:41:00.4\",kind=\"a\"} 3\n"
			       "vfhealth_x_total{vf=\"0000:41:00.4\",kind=\"b\"} "
			       "18446744073709551615\n"
			       "vfhealth_x_total{kind=\"c\"} -7\n"
			       "vfhealth_x_total{kind=\"d\"} 0.25\n");
}
END_TEST

/* No labels: no braces; a scalar is its family and one sample. */
START_TEST(test_scalar)
{
	_cleanup_free_ char *text = NULL;

	RENDER(text, {
		prom_scalar_u64(out, "vfhealth_vfs", "gauge", "Registered VFs.", 6);
		prom_sample(out, "vfhealth_y", NULL, "1");
		prom_sample_u64(out, "vfhealth_empty", PROM_LABELS({ NULL, NULL }), 0);
	});
	ck_assert_str_eq(text, "# HELP vfhealth_vfs Registered VFs.\n"
			       "# TYPE vfhealth_vfs gauge\n"
			       "vfhealth_vfs 6\n"
			       "vfhealth_y 1\n"
			       "vfhealth_empty 0\n");
}
END_TEST

/* Label values: backslash, double quote and line feed escaped, everything
 * else (UTF-8, a brace, a comma, a tab) as is; the empty value stays. */
START_TEST(test_label_escaping)
{
	_cleanup_free_ char *text = NULL;

	RENDER(text, {
		prom_sample_u64(out, "m",
				PROM_LABELS({ "a", "C:\\dir\\" }, { "b", "say \"hi\"" },
					    { "c", "one\ntwo\n" }, { "d", "" },
					    { "e", "{x},\t\xc3\xa9" }),
				1);
	});
	ck_assert_str_eq(text, "m{a=\"C:\\\\dir\\\\\",b=\"say \\\"hi\\\"\",c=\"one\\ntwo\\n\","
			       "d=\"\",e=\"{x},\t\xc3\xa9\"} 1\n");
}
END_TEST

/* A value shaped to forge a series stays inside its label, on its line. */
START_TEST(test_label_injection)
{
	_cleanup_free_ char *text = NULL;
	size_t lines = 0;

	RENDER(text, {
		prom_sample_u64(out, "vfhealth_sentinel_agent_info",
				PROM_LABELS({ "version", "1\"} 1\nvfhealth_vfs 999\n#" }), 1);
	});
	for (const char *p = text; *p; p++)
		lines += *p == '\n';
	ck_assert_uint_eq(lines, 1);
	ck_assert_str_eq(text, "vfhealth_sentinel_agent_info{version=\"1\\\"} 1\\nvfhealth_vfs "
			       "999\\n#\"} 1\n");
}
END_TEST

/* HELP text: backslash and line feed escaped, a double quote not (the
 * format escapes quotes in label values only). */
START_TEST(test_help_escaping)
{
	_cleanup_free_ char *text = NULL;

	RENDER(text, prom_family(out, "m", "gauge", "a \\ b\n\"c\""));
	ck_assert_str_eq(text, "# HELP m a \\\\ b\\n\"c\"\n# TYPE m gauge\n");
}
END_TEST

static const struct check_case prometheus_case = { .suite = "prometheus",
						   .tcase = "core",
						   .timeout = 30 };
CHECK_CASE_MAIN(prometheus_case, test_family_with_labels, test_scalar, test_label_escaping,
		test_label_injection, test_help_escaping)
