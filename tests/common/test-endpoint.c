/* SPDX-License-Identifier: MIT */
/* Unit tests for common/endpoint.c: every accepted form, the default port,
 * listen-only and connect-only forms, and the rejects (which must leave the
 * output untouched). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/endpoint.h"
#include "tests/common/check-main.h"

static struct endpoint parse_ok(const char *s)
{
	struct endpoint e;

	ck_assert_msg(endpoint_parse(s, &e) == 0, "rejected %s", s);
	return e;
}

START_TEST(test_vsock)
{
	struct endpoint e = parse_ok("vsock:3");
	char buf[ENDPOINT_STRING_MAX];

	ck_assert_int_eq(e.kind, ENDPOINT_VSOCK);
	ck_assert_uint_eq(e.cid, 3);
	ck_assert_uint_eq(e.port, 2222);
	e = parse_ok("vsock:4294967294:1");
	ck_assert_uint_eq(e.cid, 4294967294u);
	ck_assert_uint_eq(e.port, 1);
	ck_assert_int_eq(endpoint_format(&e, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "vsock:4294967294:1");

	ck_assert_int_eq(endpoint_parse_listen("vsock:any", &e), 0);
	ck_assert_uint_eq(e.cid, UINT32_MAX);
	ck_assert_uint_eq(e.port, 2222);
	ck_assert_int_eq(endpoint_format(&e, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "vsock:any:2222");
	ck_assert_int_eq(endpoint_parse_listen("vsock:any:5000", &e), 0);
	ck_assert_uint_eq(e.port, 5000);
	ck_assert_int_eq(endpoint_parse_listen("vsock:7:5000", &e), 0);
	ck_assert_uint_eq(e.cid, 7);
}
END_TEST

START_TEST(test_hvsock)
{
	struct endpoint e = parse_ok("hvsock:/run/vm/ch.vsock");
	char buf[ENDPOINT_STRING_MAX];

	ck_assert_int_eq(e.kind, ENDPOINT_HVSOCK);
	ck_assert_str_eq(e.path, "/run/vm/ch.vsock");
	ck_assert_uint_eq(e.port, 2222);
	e = parse_ok("hvsock:/run/vm.sock:1234");
	ck_assert_str_eq(e.path, "/run/vm.sock");
	ck_assert_uint_eq(e.port, 1234);
	ck_assert_int_eq(endpoint_format(&e, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "hvsock:/run/vm.sock:1234");
	/* a colon in the path that is not followed by a port stays in the path */
	e = parse_ok("hvsock:/run/a:b/vm.sock");
	ck_assert_str_eq(e.path, "/run/a:b/vm.sock");
	ck_assert_uint_eq(e.port, 2222);
}
END_TEST

START_TEST(test_unix)
{
	struct endpoint e = parse_ok("unix:/run/agent.sock");
	char buf[ENDPOINT_STRING_MAX], small[8];

	ck_assert_int_eq(e.kind, ENDPOINT_UNIX);
	ck_assert_str_eq(e.path, "/run/agent.sock");
	ck_assert_int_eq(endpoint_format(&e, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "unix:/run/agent.sock");
	ck_assert_int_eq(endpoint_format(&e, small, sizeof(small)), -ENOBUFS);
	ck_assert_int_eq(endpoint_parse_listen("unix:/tmp/x", &e), 0);
	ck_assert_str_eq(e.path, "/tmp/x");

	/* Longest path that fits sun_path with its NUL. */
	char s[200] = "unix:/";
	memset(s + 6, 'p', sizeof(e.path) - 2);
	s[6 + sizeof(e.path) - 2] = '\0';
	ck_assert_int_eq(endpoint_parse(s, &e), 0);
	ck_assert_uint_eq(strlen(e.path), sizeof(e.path) - 1);
	strcat(s, "p");
	ck_assert_int_eq(endpoint_parse(s, &e), -EINVAL);
}
END_TEST

START_TEST(test_rejects)
{
	static const char *const bad[] = {
		"",
		"vsock",
		"vsock:",
		"vsock:any",
		"vsock:any:2222",
		"vsock:-1",
		"vsock:+3",
		"vsock:3:",
		"vsock:3:0",
		"vsock:3:4294967295",
		"vsock:3:4294967296",
		"vsock:3:x",
		"vsock:3:22:1",
		"vsock: 3",
		"vsock:3 ",
		"vsock:4294967295",
		"vsock:0x3",
		"vsock::2222",
		"VSOCK:3",
		"tcp:1.2.3.4:5",
		"unix:",
		"unix:relative/path",
		"unix:~/x",
		"hvsock:",
		"hvsock:rel:2222",
		"hvsock:/x:",
		"hvsock:/x:0",
		"hvsock::2222",
		"/run/agent.sock",
		"unix:/a\nb",
		"hvsock:/x:99999999999",
		/* no control characters (ESC, CR, BEL, DEL, tab), no leading zeros */
		"unix:/a\x1b[31mb",
		"unix:/a\rb",
		"unix:/a\ab",
		"unix:/a\tb",
		"hvsock:/a\x7f:2222",
		"vsock:03",
		"vsock:3:02222",
		"hvsock:/x:02222",
	};
	struct endpoint e = { .kind = ENDPOINT_UNIX, .path = "/untouched" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(endpoint_parse(bad[i], &e) == -EINVAL, "accepted '%s'", bad[i]);
		ck_assert_str_eq(e.path, "/untouched");
	}
	/* connect-only and listen-only forms */
	ck_assert_int_eq(endpoint_parse_listen("hvsock:/run/vm.sock:2222", &e), -EINVAL);
	ck_assert_int_eq(endpoint_parse_listen("vsock:any:0", &e), -EINVAL);
	ck_assert_int_eq(endpoint_parse_listen("vsock:all", &e), -EINVAL);
	ck_assert_int_eq(endpoint_parse(NULL, &e), -EINVAL);

	/* Overlong input is refused without reading all of it. */
	_cleanup_free_ char *huge = malloc(1 << 20);
	memcpy(huge, "unix:/", 6);
	memset(huge + 6, 'a', (1 << 20) - 7);
	huge[(1 << 20) - 1] = '\0';
	ck_assert_int_eq(endpoint_parse(huge, &e), -EINVAL);
	ck_assert_str_eq(e.path, "/untouched");
}
END_TEST

static const struct check_case endpoint_case = { .suite = "endpoint",
						 .tcase = "core",
						 .timeout = 30 };
CHECK_CASE_MAIN(endpoint_case, test_vsock, test_hvsock, test_unix, test_rejects)
