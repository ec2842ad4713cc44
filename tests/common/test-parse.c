/* SPDX-License-Identifier: MIT */
/* Unit tests for common/parse.c: the strict parsers every input goes through. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/parse.h"
#include "common/path.h"
#include "tests/common/check-main.h"

START_TEST(test_uint64)
{
	static const struct {
		const char *text;
		uint64_t min, max;
	} out_of_range[] = {
		{ "1001", 1, 1000 },
		{ "0", 1, 1000 },
		{ "99999999999999999999999", 0, UINT64_MAX },
	};
	/* Malformed, or not canonical (one spelling per value), though the
	 * value is within 0..1000. */
	static const char *const malformed[] = { "",     " 1", "1 ", "-1", "+1",
						 "0x10", "01", "00", "03", "0001000" };
	uint64_t v = 77;

	ck_assert_int_eq(parse_uint64("0", 0, 10, &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(parse_uint64("1000", 1, 1000, &v), 0);
	ck_assert_uint_eq(v, 1000);
	ck_assert_int_eq(parse_uint64("10", 0, 10, &v), 0);
	ck_assert_uint_eq(v, 10);
	for (size_t i = 0; i < ARRAY_SIZE(out_of_range); i++) {
		v = 77;
		ck_assert_msg(parse_uint64(out_of_range[i].text, out_of_range[i].min,
					   out_of_range[i].max, &v) == -ERANGE,
			      "%s: not -ERANGE", out_of_range[i].text);
		ck_assert_uint_eq(v, 77); /* untouched on failure */
	}
	for (size_t i = 0; i < ARRAY_SIZE(malformed); i++) {
		v = 77;
		ck_assert_msg(parse_uint64(malformed[i], 0, 1000, &v) == -EINVAL,
			      "'%s': not -EINVAL", malformed[i]);
		ck_assert_uint_eq(v, 77);
	}
}
END_TEST

START_TEST(test_seconds)
{
	int64_t ns = 5;

	ck_assert_int_eq(parse_seconds("5", 3600LL * 1000000000, &ns), 0);
	ck_assert_int_eq(ns, 5000000000LL);
	ck_assert_int_eq(parse_seconds("0.2", 3600LL * 1000000000, &ns), 0);
	ck_assert_int_eq(ns, 200000000LL);
	ck_assert_int_eq(parse_seconds(".5", 3600LL * 1000000000, &ns), 0);
	ck_assert_int_eq(ns, 500000000LL);
	ck_assert_int_eq(parse_seconds("1.000000001", 3600LL * 1000000000, &ns), 0);
	ck_assert_int_eq(ns, 1000000001LL);
	ns = 9;
	ck_assert_int_eq(parse_seconds("0", 3600LL * 1000000000, &ns), -ERANGE);
	ck_assert_int_eq(parse_seconds("0.0", 3600LL * 1000000000, &ns), -ERANGE);
	ck_assert_int_eq(parse_seconds("3601", 3600LL * 1000000000, &ns), -ERANGE);
	ck_assert_int_eq(parse_seconds("99999999999999999999", 3600LL * 1000000000, &ns), -ERANGE);
	ck_assert_int_eq(parse_seconds("", 10, &ns), -EINVAL);
	ck_assert_int_eq(parse_seconds(".", 10, &ns), -EINVAL);
	ck_assert_int_eq(parse_seconds("1s", 10000000000LL, &ns), -EINVAL);
	ck_assert_int_eq(parse_seconds("-1", 10000000000LL, &ns), -EINVAL);
	ck_assert_int_eq(parse_seconds("1e3", 10000000000LL, &ns), -EINVAL);
	ck_assert_int_eq(ns, 9);
}
END_TEST

START_TEST(test_rfc3339)
{
	char out[RFC3339_BUFSZ];

	ck_assert_int_eq(rfc3339_normalize("2026-11-29T07:44:51.123456789Z", out), 0);
	ck_assert_str_eq(out, "2026-11-29T07:44:51.123456789Z");
	ck_assert_int_eq(rfc3339_normalize("2026-11-29T07:44:51Z", out), 0);
	ck_assert_str_eq(out, "2026-11-29T07:44:51.000000000Z");
	ck_assert_int_eq(rfc3339_normalize("2026-11-29t07:44:51.5z", out), 0);
	ck_assert_str_eq(out, "2026-11-29T07:44:51.500000000Z");
	ck_assert_int_eq(rfc3339_normalize("2024-02-29T00:00:00Z", out), 0);
	ck_assert_int_eq(rfc3339_normalize("2000-02-29T23:59:59.999999999Z", out), 0);
	ck_assert_int_eq(rfc3339_normalize("9999-12-31T23:59:59Z", out), 0);
	ck_assert_str_eq(out, "9999-12-31T23:59:59.000000000Z");

	strcpy(out, "unchanged");
	const char *bad[] = {
		"",
		"2026-11-29",
		"2026-11-29T07:44:51",
		"2026-11-29T07:44:51+00:00",
		"2026-11-29 07:44:51Z",
		"2026-13-01T00:00:00Z",
		"2026-11-31T00:00:00Z",
		"2023-02-29T00:00:00Z",
		"2026-11-29T24:00:00Z",
		"2026-11-29T07:60:00Z",
		"2026-11-29T07:44:51.Z",
		"2026-11-29T07:44:51.1234567891Z",
		"2026-11-29T07:44:51.12Zjunk",
		"1969-12-31T23:59:59Z",
		"2026-1-29T07:44:51Z",
		"2100-02-29T00:00:00Z", /* a century: no leap day */
		"2026-04-31T00:00:00Z",
		"2026-00-10T00:00:00Z",
		"2026-11-00T00:00:00Z",
		"2026-11-29T07:44:60Z", /* no leap second */
		"2026-11-29T07:44:51.5-01:00",
		"2026-11-29T07:44:51Z ",
		"2026-11-29T07:44:51.123456789Z\n",
		"+2026-11-29T07:44:51Z",
		"2026-11-29T07:44:5aZ",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(rfc3339_normalize(bad[i], out) == -EINVAL, "accepted %s", bad[i]);
	ck_assert_str_eq(out, "unchanged");
}
END_TEST

START_TEST(test_rfc3339_format_roundtrip)
{
	char a[RFC3339_BUFSZ], b[RFC3339_BUFSZ];

	rfc3339_format(0, 0, a);
	ck_assert_str_eq(a, "1970-01-01T00:00:00.000000000Z");
	rfc3339_format(1795938291, 123456789, a);
	ck_assert_str_eq(a, "2026-11-29T07:44:51.123456789Z");
	rfc3339_now(a);
	ck_assert_int_eq(strlen(a), RFC3339_NANO_LEN);
	ck_assert_int_eq(rfc3339_normalize(a, b), 0);
	ck_assert_str_eq(a, b);

	int64_t sec = 7;
	ck_assert_int_eq(rfc3339_to_unix("2026-11-29T07:44:51.123456789Z", &sec), 0);
	ck_assert_int_eq(sec, 1795938291);
	ck_assert_int_eq(rfc3339_to_unix("1970-01-01t00:00:00z", &sec), 0);
	ck_assert_int_eq(sec, 0);
	sec = 7;
	ck_assert_int_eq(rfc3339_to_unix("2026-02-30T00:00:00Z", &sec), -EINVAL);
	ck_assert_int_eq(sec, 7); /* untouched on failure */
}
END_TEST

/* Seconds agree with the C library (gmtime_r, through rfc3339_format, and
 * timegm) on the last second of every day from 1970 to 2110, and on the
 * days around the leap days of 2400 and 9996. */
START_TEST(test_rfc3339_to_unix_days)
{
	static const char *const days[] = { "2400-02-28T12:00:00Z", "2400-02-29T12:00:00Z",
					    "2400-03-01T12:00:00Z", "9996-02-29T12:00:00Z",
					    "9999-12-31T23:59:59Z" };
	char text[RFC3339_BUFSZ];
	int64_t sec = -1;
	struct tm tm;

	for (int64_t day = 0; day < 51500; day++) {
		int64_t t = day * 86400 + 86399;

		rfc3339_format(t, 0, text);
		ck_assert_int_eq(rfc3339_to_unix(text, &sec), 0);
		ck_assert_int_eq(sec, t);
	}
	for (size_t i = 0; i < sizeof(days) / sizeof(days[0]); i++) {
		memset(&tm, 0, sizeof(tm));
		ck_assert_ptr_nonnull(strptime(days[i], "%Y-%m-%dT%H:%M:%SZ", &tm));
		ck_assert_int_eq(rfc3339_to_unix(days[i], &sec), 0);
		ck_assert_int_eq(sec, (int64_t)timegm(&tm));
	}
}
END_TEST

START_TEST(test_rfc3339_to_ns)
{
	int64_t ns = 7;

	ck_assert_int_eq(rfc3339_to_ns("2026-11-29T07:44:51.123456789Z", &ns), 0);
	ck_assert_int_eq(ns, INT64_C(1795938291123456789));
	ck_assert_int_eq(rfc3339_to_ns("2026-11-29t07:44:51.5z", &ns), 0); /* any spelling */
	ck_assert_int_eq(ns, INT64_C(1795938291500000000));
	ck_assert_int_eq(rfc3339_to_ns("1970-01-01T00:00:00Z", &ns), 0);
	ck_assert_int_eq(ns, 0);
	/* the last nanosecond an int64_t holds, and the next */
	ck_assert_int_eq(rfc3339_to_ns("2262-04-11T23:47:16.854775807Z", &ns), 0);
	ck_assert_int_eq(ns, INT64_MAX);
	ns = 7;
	ck_assert_int_eq(rfc3339_to_ns("2262-04-11T23:47:16.854775808Z", &ns), -EINVAL);
	ck_assert_int_eq(rfc3339_to_ns("9999-12-31T23:59:59Z", &ns), -EINVAL);
	ck_assert_int_eq(rfc3339_to_ns("2026-11-29T07:44:51+00:00", &ns), -EINVAL);
	ck_assert_int_eq(rfc3339_to_ns("", &ns), -EINVAL);
	ck_assert_int_eq(rfc3339_to_ns(NULL, &ns), -EINVAL);
	ck_assert_int_eq(ns, 7); /* untouched on failure */
}
END_TEST

/* Canonical text only, byte for byte: another spelling of a valid instant
 * is refused as firmly as garbage. */
START_TEST(test_rfc3339_canonical_split)
{
	int64_t sec = 7;
	uint32_t nsec = 7;

	ck_assert_int_eq(rfc3339_canonical_split("2026-11-29T07:44:51.123456789Z", &sec, &nsec), 0);
	ck_assert_int_eq(sec, 1795938291);
	ck_assert_uint_eq(nsec, 123456789);
	ck_assert_int_eq(rfc3339_canonical_split("9999-12-31T23:59:59.999999999Z", &sec, &nsec), 0);
	ck_assert_int_eq(sec, INT64_C(253402300799));
	ck_assert_uint_eq(nsec, 999999999);
	sec = nsec = 7;
	const char *other[] = {
		"2026-11-29T07:44:51Z",
		"2026-11-29T07:44:51.12345678Z",
		"2026-11-29t07:44:51.123456789Z",
		"2026-11-29T07:44:51.123456789z",
		"2026-11-29T07:44:51.123456789Zx",
		"2026-02-30T07:44:51.123456789Z",
		"",
	};
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		ck_assert_msg(rfc3339_canonical_split(other[i], &sec, &nsec) == -EINVAL,
			      "accepted %s", other[i]);
	ck_assert_int_eq(sec, 7);
	ck_assert_uint_eq(nsec, 7);
}
END_TEST

START_TEST(test_rfc3339_normalize_optional)
{
	char out[RFC3339_BUFSZ] = "unchanged";

	ck_assert_int_eq(rfc3339_normalize_optional(NULL, out), 0);
	ck_assert_str_eq(out, "");
	strcpy(out, "unchanged");
	ck_assert_int_eq(rfc3339_normalize_optional("", out), 0);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(rfc3339_normalize_optional("2026-11-29T07:44:51Z", out), 0);
	ck_assert_str_eq(out, "2026-11-29T07:44:51.000000000Z");
	strcpy(out, "unchanged");
	ck_assert_int_eq(rfc3339_normalize_optional("-", out), -EINVAL);
	ck_assert_int_eq(rfc3339_normalize_optional(" ", out), -EINVAL);
	ck_assert_str_eq(out, "unchanged");
}
END_TEST

START_TEST(test_instance_id)
{
	char longest[INSTANCE_ID_MAX + 2];

	ck_assert(instance_id_valid("i-0123"));
	ck_assert(instance_id_valid("vm_1.a-B"));
	ck_assert(!instance_id_valid(""));
	ck_assert(!instance_id_valid(".hidden"));
	ck_assert(!instance_id_valid("a/b"));
	ck_assert(!instance_id_valid("a b"));
	ck_assert(!instance_id_valid("é"));
	memset(longest, 'a', INSTANCE_ID_MAX);
	longest[INSTANCE_ID_MAX] = '\0';
	ck_assert(instance_id_valid(longest));
	longest[INSTANCE_ID_MAX] = 'a';
	longest[INSTANCE_ID_MAX + 1] = '\0';
	ck_assert(!instance_id_valid(longest));
}
END_TEST

/* path_absolute (common/path.h): absolute as given, relative from the cwd. */
START_TEST(test_path_absolute)
{
	_cleanup_free_ char *cwd = getcwd(NULL, 0);
	_cleanup_free_ char *abs = path_absolute("/a/b");
	_cleanup_free_ char *rel = path_absolute("x/y");
	_cleanup_free_ char *want = NULL;

	ck_assert_ptr_nonnull(cwd);
	ck_assert_str_eq(abs, "/a/b");
	ck_assert_int_gt(asprintf(&want, "%s/x/y", cwd), 0);
	ck_assert_str_eq(rel, want);
}
END_TEST

/* path_read (common/path.h): the whole file, grown past the first 4096
 * bytes, NUL-terminated; -E2BIG one byte past max; -errno of the open. */
START_TEST(test_path_read)
{
	char tmpl[] = "/tmp/vfhealth-path-read.XXXXXX";
	int fd = mkstemp(tmpl);
	_cleanup_free_ char *text = NULL, *big = NULL;
	size_t len = 0;

	ck_assert_int_ge(fd, 0);
	big = malloc(10000);
	ck_assert_ptr_nonnull(big);
	for (size_t i = 0; i < 10000; i++)
		big[i] = (char)('a' + i % 26);
	ck_assert_int_eq(write(fd, big, 10000), 10000);
	close(fd);
	ck_assert_int_eq(path_read(tmpl, 10000, &text, &len), 0);
	ck_assert_uint_eq(len, 10000);
	ck_assert_int_eq(memcmp(text, big, 10000), 0);
	ck_assert_int_eq(text[10000], '\0');
	free(text);
	text = NULL;
	ck_assert_int_eq(path_read(tmpl, 9999, &text, &len), -E2BIG);
	ck_assert_ptr_null(text);
	ck_assert_int_eq(unlink(tmpl), 0);
	ck_assert_int_eq(path_read(tmpl, 10, &text, &len), -ENOENT);
	ck_assert_int_eq(path_read("/dev/null", 0, &text, &len), 0);
	ck_assert_uint_eq(len, 0);
	ck_assert_str_eq(text, "");
}
END_TEST

static const struct check_case parse_case = { .suite = "parse", .tcase = "parse", .timeout = 30 };
CHECK_CASE_MAIN(parse_case, test_uint64, test_seconds, test_rfc3339, test_rfc3339_format_roundtrip,
		test_rfc3339_to_unix_days, test_rfc3339_to_ns, test_rfc3339_canonical_split,
		test_rfc3339_normalize_optional, test_instance_id, test_path_absolute,
		test_path_read)
