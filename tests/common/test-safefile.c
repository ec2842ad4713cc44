/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for common/safefile.c: root replaces a file in a directory other
 * users can write without following any link they plant.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/safefile.h"
#include "tests/common/check-main.h"

static char dir[64], victim[128], target[128];

static void setup(void)
{
	FILE *f;

	snprintf(dir, sizeof(dir), "/tmp/vfhealth-safefile.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	snprintf(target, sizeof(target), "%s/vfhealth.prom", dir);
	f = fopen(victim, "w");
	ck_assert_ptr_nonnull(f);
	fputs("secret\n", f);
	fclose(f);
	chmod(victim, 0600);
}

static void teardown(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	while (d && (e = readdir(d))) {
		char path[512];
		if (e->d_name[0] == '.' &&
		    (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

static int render_hello(void *userdata, FILE *out)
{
	fprintf(out, "%s\n", (const char *)userdata);
	return 0;
}

static int render_fail(void *userdata, FILE *out)
{
	fputs("partial", out);
	return -EIO;
}

static void assert_content(const char *path, const char *want)
{
	char buf[64] = "";
	FILE *f = fopen(path, "r");

	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
	fclose(f);
	ck_assert_str_eq(buf, want);
}

static size_t dir_entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

START_TEST(test_replace_creates_with_mode)
{
	struct stat st;

	ck_assert_int_eq(safefile_replace(target, 0644, render_hello, (void *)"one"), 0);
	assert_content(target, "one\n");
	ck_assert_int_eq(stat(target, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0644);
	ck_assert_int_eq(safefile_replace(target, 0644, render_hello, (void *)"two"), 0);
	assert_content(target, "two\n");
	ck_assert_uint_eq(dir_entries(), 2); /* victim + target: no temporary left */
}
END_TEST

/* A symlink planted at the target name is replaced, never written through. */
START_TEST(test_symlink_at_target_not_followed)
{
	struct stat st;

	ck_assert_int_eq(symlink(victim, target), 0);
	ck_assert_int_eq(safefile_replace(target, 0644, render_hello, (void *)"metrics"), 0);
	assert_content(victim, "secret\n");
	ck_assert_int_eq(stat(victim, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(lstat(target, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	assert_content(target, "metrics\n");
}
END_TEST

/* The old code wrote PATH.tmp: a link planted at that predictable name (or
 * any name) must not be followed either. */
START_TEST(test_symlink_at_old_temp_name_not_followed)
{
	char tmp[160];

	snprintf(tmp, sizeof(tmp), "%s.tmp", target);
	ck_assert_int_eq(symlink(victim, tmp), 0);
	ck_assert_int_eq(safefile_replace(target, 0644, render_hello, (void *)"metrics"), 0);
	assert_content(victim, "secret\n");
	assert_content(target, "metrics\n");
}
END_TEST

/* A render error leaves the old content and no temporary behind. */
START_TEST(test_render_failure_changes_nothing)
{
	ck_assert_int_eq(safefile_replace(target, 0644, render_hello, (void *)"old"), 0);
	ck_assert_int_eq(safefile_replace(target, 0644, render_fail, NULL), -EIO);
	assert_content(target, "old\n");
	ck_assert_uint_eq(dir_entries(), 2);
}
END_TEST

START_TEST(test_bad_paths)
{
	ck_assert_int_eq(safefile_replace("/nonexistent-dir-vfhealth/x", 0644, render_hello,
					  (void *)"x"),
			 -ENOENT);
	ck_assert_int_eq(safefile_replace("/", 0644, render_hello, (void *)"x"), -EINVAL);
}
END_TEST

static const struct check_case safefile_case = {
	.suite = "safefile",
	.tcase = "replace",
	.timeout = 30,
	.setup = setup,
	.teardown = teardown,
};
CHECK_CASE_MAIN(safefile_case, test_replace_creates_with_mode, test_symlink_at_target_not_followed,
		test_symlink_at_old_temp_name_not_followed, test_render_failure_changes_nothing,
		test_bad_paths)
