/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for common/sockdir.c: the socket directories that confine the
 * socket paths of claims.  The lexical rule on paths
 * (inside, outside, "..", ".", "//", prefixes that are not directories), the
 * option's checks, and the resolution rule on a real tree: a socket below a
 * directory opens, a symlink (as a middle or last component, or pointing
 * back inside) is EACCES, missing parts are ENOENT, and the fallback walk
 * without openat2 says the same.  A socket reached through the descriptor
 * is the very inode checked.  The claim rule both programs call
 * (sockdirs_check_claim): control first, then a Unix or hybrid-vsock
 * agent's path, a vsock agent never; what was refused is named.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/endpoint.h"
#include "common/sockdir.h"
#include "sentinel/options.h" /* SENTINEL_OPTIONS_HELP lists the defaults */
#include "tests/common/check-main.h"

START_TEST(test_add)
{
	struct sockdirs d = { 0 };
	char long_dir[SOCKDIR_PATH_MAX + 8];

	ck_assert_int_eq(sockdirs_add(&d, "/run/vm"), 0);
	ck_assert_int_eq(sockdirs_add(&d, "/run/vm/"), 0); /* the same one */
	ck_assert_uint_eq(d.count, 1);
	ck_assert_str_eq(d.dir[0], "/run/vm");
	static const char *const bad[] = { "",          "/",         "//",          "run/vm",
					   "/run//vm",  "/run/./vm", "/run/../etc", "/run/vm/..",
					   "/run/vm//", "/a\nb" };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ck_assert_msg(sockdirs_add(&d, bad[i]) == -EINVAL, "accepted \"%s\"", bad[i]);
	memset(long_dir, 'a', sizeof(long_dir) - 1);
	long_dir[0] = '/';
	long_dir[sizeof(long_dir) - 1] = '\0';
	ck_assert_int_eq(sockdirs_add(&d, long_dir), -ENAMETOOLONG);
	for (unsigned i = 1; i < SOCKDIRS_MAX; i++) {
		char dir[32];
		snprintf(dir, sizeof(dir), "/d%u", i);
		ck_assert_int_eq(sockdirs_add(&d, dir), 0);
	}
	ck_assert_int_eq(sockdirs_add(&d, "/one-too-many"), -E2BIG);
	ck_assert_uint_eq(d.count, SOCKDIRS_MAX);
}
END_TEST

START_TEST(test_defaults)
{
	static const char *const defaults[] = { SOCKDIRS_DEFAULT };
	struct sockdirs d;

	sockdirs_init_default(&d);
	ck_assert_uint_eq(d.count, ARRAY_SIZE(defaults));
	for (size_t i = 0; i < ARRAY_SIZE(defaults); i++) {
		ck_assert_str_eq(d.dir[i], defaults[i]);
		/* Never /run or /var/run as a whole: root's service sockets live there. */
		ck_assert_str_ne(d.dir[i], "/run");
		ck_assert_str_ne(d.dir[i], "/var/run");
		ck_assert_msg(strstr(SENTINEL_OPTIONS_HELP, defaults[i]), "--help omits %s",
			      defaults[i]);
	}
	ck_assert_int_lt(sockdirs_find(&d, "/run/systemd/private"), 0);
	ck_assert_int_lt(sockdirs_find(&d, "/run/dbus/system_bus_socket"), 0);
	ck_assert_int_lt(sockdirs_find(&d, "/var/run/libvirt/qemu/x.sock"), 0);
	ck_assert_int_ge(sockdirs_find(&d, "/run/libvirt/qemu/x.sock"), 0);
}
END_TEST

START_TEST(test_find)
{
	struct sockdirs d = { 0 };

	ck_assert_int_eq(sockdirs_add(&d, "/run/a"), 0);
	ck_assert_int_eq(sockdirs_add(&d, "/var/lib/b"), 0);
	ck_assert_int_eq(sockdirs_find(&d, "/run/a/x.sock"), 0);
	ck_assert_int_eq(sockdirs_find(&d, "/run/a/vm-1/x.sock"), 0);
	ck_assert_int_eq(sockdirs_find(&d, "/var/lib/b/x"), 1);
	static const char *const outside[] = {
		"/run/a",
		"/run/a/",
		"/run/ab/x.sock",
		"/run/x.sock",
		"/etc/shadow",
		"run/a/x",
		"/run/a/../x",
		"/run/a/../../etc/shadow",
		"/run/a/./x",
		"/run/a//x",
		"/run/a/x/",
		"/run/a/x/..",
		"/run/a/..",
		"/run//a/x",
		"",
		"/",
	};
	for (size_t i = 0; i < ARRAY_SIZE(outside); i++)
		ck_assert_msg(sockdirs_find(&d, outside[i]) == -EACCES, "\"%s\" is inside",
			      outside[i]);
	ck_assert_int_eq(sockdirs_find(&d, NULL), -EACCES);
}
END_TEST

/* A tree: ROOT/ok/s.sock (listening), ROOT/link -> OUT, ROOT/ok/last -> OUT/t.sock,
 * ROOT/ok/inner -> s.sock (inside, still a symlink), ROOT/file, OUT/t.sock. */
static char base[64], root[128], out[128];
static int listener = -1;

static void bind_at(const char *path, int *ret)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(fd, 8), 0);
	*ret = fd;
}

static void tree_setup(void)
{
	char p[256], q[256];
	int out_fd;

	snprintf(base, sizeof(base), "/tmp/vfhealth-sockdir.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(base));
	snprintf(root, sizeof(root), "%s/root", base);
	snprintf(out, sizeof(out), "%s/out", base);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	ck_assert_int_eq(mkdir(out, 0700), 0);
	snprintf(p, sizeof(p), "%s/ok", root);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/ok/s.sock", root);
	bind_at(p, &listener);
	snprintf(p, sizeof(p), "%s/t.sock", out);
	bind_at(p, &out_fd);
	close(out_fd);
	snprintf(p, sizeof(p), "%s/link", root);
	ck_assert_int_eq(symlink(out, p), 0);
	snprintf(p, sizeof(p), "%s/ok/last", root);
	snprintf(q, sizeof(q), "%s/t.sock", out);
	ck_assert_int_eq(symlink(q, p), 0);
	snprintf(p, sizeof(p), "%s/ok/inner", root);
	ck_assert_int_eq(symlink("s.sock", p), 0);
	snprintf(p, sizeof(p), "%s/file", root);
	close(open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
}

static void tree_teardown(void)
{
	char cmd[128];

	if (listener >= 0)
		close(listener);
	listener = -1;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	ck_assert_int_eq(system(cmd), 0);
}

static void path_of(char *buf, size_t size, const char *rel)
{
	snprintf(buf, size, "%s/%s", root, rel);
}

START_TEST(test_open)
{
	struct sockdirs d = { 0 };
	struct stat st;
	char p[256];
	int fd;

	ck_assert_int_eq(sockdirs_add(&d, root), 0);
	path_of(p, sizeof(p), "ok/s.sock");
	fd = sockdirs_open(&d, p);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	close(fd);
	ck_assert_int_eq(sockdirs_check(&d, p), 0);

	static const char *const refused[] = { "link/t.sock", "ok/last", "ok/inner", "link" };
	for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
		path_of(p, sizeof(p), refused[i]);
		ck_assert_msg(sockdirs_open(&d, p) == -EACCES, "%s opened", refused[i]);
		ck_assert_msg(sockdirs_check(&d, p) == -EACCES, "%s passed", refused[i]);
	}
	snprintf(p, sizeof(p), "%s/t.sock", out);
	ck_assert_int_eq(sockdirs_open(&d, p), -EACCES);
	path_of(p, sizeof(p), "../out/t.sock");
	ck_assert_int_eq(sockdirs_check(&d, p), -EACCES);
	/* Not there (yet): the check passes, the open says so. */
	path_of(p, sizeof(p), "vm-9/ctl.sock");
	ck_assert_int_eq(sockdirs_open(&d, p), -ENOENT);
	ck_assert_int_eq(sockdirs_check(&d, p), 0);
	path_of(p, sizeof(p), "file/x");
	ck_assert_int_eq(sockdirs_open(&d, p), -ENOTDIR);
	/* A directory that does not exist is not an error of the check either. */
	ck_assert_int_eq(sockdirs_add(&d, "/nonexistent-vfhealth-dir"), 0);
	ck_assert_int_eq(sockdirs_open(&d, "/nonexistent-vfhealth-dir/x"), -ENOENT);
	ck_assert_int_eq(sockdirs_check(&d, "/nonexistent-vfhealth-dir/x"), 0);
}
END_TEST

START_TEST(test_claim)
{
	struct sockdirs d = { 0 };
	struct endpoint vsock = { .kind = ENDPOINT_VSOCK, .cid = 3, .port = 2222 };
	struct endpoint unix_in = { .kind = ENDPOINT_UNIX }, unix_out = { .kind = ENDPOINT_UNIX };
	struct endpoint hv_link = { .kind = ENDPOINT_HVSOCK, .port = 2222 };
	const char *key = NULL, *path = NULL;
	char in[256], out_path[256];

	ck_assert_int_eq(sockdirs_add(&d, root), 0);
	path_of(in, sizeof(in), "ok/s.sock");
	snprintf(out_path, sizeof(out_path), "%s/t.sock", out);
	ck_assert_uint_lt(strlen(out_path), sizeof(unix_out.path));
	memcpy(unix_in.path, in, strlen(in) + 1);
	memcpy(unix_out.path, out_path, strlen(out_path) + 1);
	path_of(in, sizeof(in), "link/t.sock");
	ck_assert_uint_lt(strlen(in), sizeof(hv_link.path));
	memcpy(hv_link.path, in, strlen(in) + 1);
	path_of(in, sizeof(in), "ok/s.sock");

	/* nothing named, or everything inside: confined, nothing written */
	ck_assert_int_eq(sockdirs_check_claim(&d, NULL, NULL, &key, &path), 0);
	ck_assert_int_eq(sockdirs_check_claim(&d, "", NULL, &key, &path), 0);
	ck_assert_int_eq(sockdirs_check_claim(&d, in, &unix_in, &key, &path), 0);
	ck_assert_ptr_null(key);
	ck_assert_ptr_null(path);
	/* a vsock agent names no path: whatever its CID, nothing to confine */
	ck_assert_int_eq(sockdirs_check_claim(&d, NULL, &vsock, &key, &path), 0);
	/* control outside */
	ck_assert_int_eq(sockdirs_check_claim(&d, out_path, &unix_in, &key, &path), -EACCES);
	ck_assert_str_eq(key, "control");
	ck_assert_str_eq(path, out_path);
	/* control first: both outside names control */
	key = path = NULL;
	ck_assert_int_eq(sockdirs_check_claim(&d, out_path, &unix_out, &key, &path), -EACCES);
	ck_assert_str_eq(key, "control");
	/* a Unix agent outside, a hybrid-vsock agent through a symlink */
	ck_assert_int_eq(sockdirs_check_claim(&d, in, &unix_out, &key, &path), -EACCES);
	ck_assert_str_eq(key, "agent");
	ck_assert_str_eq(path, out_path);
	ck_assert_int_eq(sockdirs_check_claim(&d, NULL, &hv_link, &key, &path), -EACCES);
	ck_assert_str_eq(key, "agent");
	ck_assert_str_eq(path, hv_link.path);
	/* relative, or not normalized: refused like outside */
	ck_assert_int_eq(sockdirs_check_claim(&d, "ctl.sock", NULL, &key, &path), -EACCES);
	path_of(in, sizeof(in), "ok/../../out/t.sock");
	ck_assert_int_eq(sockdirs_check_claim(&d, in, NULL, &key, &path), -EACCES);
}
END_TEST

START_TEST(test_walk)
{
	int dirfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	int fd;

	ck_assert_int_ge(dirfd, 0);
	fd = sockdirs_open_walk(dirfd, "ok/s.sock");
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	close(fd);
	ck_assert_int_eq(sockdirs_open_walk(dirfd, "link/t.sock"), -EACCES);
	ck_assert_int_eq(sockdirs_open_walk(dirfd, "ok/last"), -EACCES);
	ck_assert_int_eq(sockdirs_open_walk(dirfd, "ok/inner"), -EACCES);
	ck_assert_int_eq(sockdirs_open_walk(dirfd, "../out/t.sock"), -EACCES);
	ck_assert_int_eq(sockdirs_open_walk(dirfd, "ok//s.sock"), -EACCES);
	ck_assert_int_eq(sockdirs_open_walk(dirfd, "missing/x"), -ENOENT);
	ck_assert_int_eq(sockdirs_open_walk(dirfd, "file/x"), -ENOTDIR);
	close(dirfd);
}
END_TEST

/* Connect through the descriptor, then swap the path for a symlink to a
 * socket outside: the descriptor still names the socket checked. */
START_TEST(test_connect_by_fd)
{
	struct sockdirs d = { 0 };
	struct sockaddr_un sa;
	char p[256], q[256];
	socklen_t len;
	int fd, c, a;

	ck_assert_int_eq(sockdirs_add(&d, root), 0);
	path_of(p, sizeof(p), "ok/s.sock");
	fd = sockdirs_open(&d, p);
	ck_assert_int_ge(fd, 0);
	snprintf(q, sizeof(q), "%s/t.sock", out);
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_int_eq(symlink(q, p), 0); /* too late: fd is the old inode */
	len = sockdirs_sockaddr(fd, &sa);
	c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(connect(c, (struct sockaddr *)&sa, len), 0);
	a = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	ck_assert_int_ge(a, 0); /* the connection reached the checked listener */
	close(a);
	close(c);
	close(fd);
	/* And the swapped path itself is refused now. */
	ck_assert_int_eq(sockdirs_open(&d, p), -EACCES);
}
END_TEST

static Suite *sockdir_suite(void)
{
	Suite *s = suite_create("sockdir");
	TCase *lexical = check_tcase("lexical", 30);
	TCase *tree = check_tcase("tree", 30);

	tcase_add_test(lexical, test_add);
	tcase_add_test(lexical, test_defaults);
	tcase_add_test(lexical, test_find);
	tcase_add_checked_fixture(tree, tree_setup, tree_teardown);
	tcase_add_test(tree, test_open);
	tcase_add_test(tree, test_walk);
	tcase_add_test(tree, test_claim);
	tcase_add_test(tree, test_connect_by_fd);
	suite_add_tcase(s, lexical);
	suite_add_tcase(s, tree);
	return s;
}

CHECK_MAIN(sockdir_suite)
