/* SPDX-License-Identifier: MIT */
/* Unit tests for sentinel/counters.c: the shared table's stamp is checked by
 * both sides, so that a vfhealthd and a vfhealth-sentinel of different
 * layouts refuse each other instead of misreading each other's numbers; a
 * matching table renders its series.  Linked against libvfcounters alone,
 * as vfhealthd is. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "sentinel/counters.h"
#include "tests/common/check-main.h"

/* The table rendered as text (caller frees). */
static char *render(struct sentinel_counters *c)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	ck_assert_ptr_nonnull(out);
	sentinel_counters_render(c, out);
	fclose(out);
	return text;
}

/* A table as vfhealthd makes it, counted into, maps in the child and
 * renders its numbers. */
START_TEST(test_same_layout)
{
	struct sentinel_counters *made = NULL, *mapped = NULL;
	_cleanup_free_ char *text = NULL;
	int fd = -1;

	ck_assert_int_eq(sentinel_counters_create(&fd, &made), 0);
	ck_assert_int_eq(sentinel_counters_check(made), 0);
	ck_assert_int_eq(sentinel_counters_map(fd, &mapped), 0);
	atomic_fetch_add(&mapped->polls, 7);
	atomic_fetch_add(&mapped->checks[CHECK_FAILED], 3);
	text = render(made);
	ck_assert_ptr_nonnull(strstr(text, "vfhealth_sentinel_polls_total 7\n"));
	ck_assert_ptr_nonnull(
		strstr(text, "vfhealth_sentinel_checks_total{result=\"failed\"} 3\n"));
	ck_assert_ptr_null(strstr(text, "another layout"));
	sentinel_counters_unmap(mapped);
	sentinel_counters_unmap(made);
	close(fd);
}
END_TEST

/* Each part of the stamp, changed alone, is refused by the child's map and
 * by the renderer, which says so and prints no series. */
START_TEST(test_other_layout_refused)
{
	struct sentinel_counters *made = NULL, *mapped = NULL;
	_cleanup_free_ char *text = NULL;
	uint64_t *field;
	int fd = -1;

	ck_assert_int_eq(sentinel_counters_create(&fd, &made), 0);
	atomic_fetch_add(&made->polls, 7);
	switch (_i) {
	case 0:
		field = &made->magic;
		break;
	case 1:
		field = &made->version;
		break;
	default:
		field = &made->layout;
		break;
	}
	(*field)++;
	ck_assert_int_eq(sentinel_counters_check(made), -EPROTO);
	ck_assert_int_eq(sentinel_counters_map(fd, &mapped), -EPROTO);
	ck_assert_ptr_null(mapped);
	text = render(made);
	ck_assert_ptr_nonnull(strstr(text, "# vfhealth-sentinel: counter table of another layout"));
	ck_assert_ptr_null(strstr(text, "vfhealth_sentinel_polls_total"));
	ck_assert_ptr_null(strstr(text, "# TYPE"));
	sentinel_counters_unmap(made);
	close(fd);
}
END_TEST

/* A table of another size (a build whose fields differ in number) is
 * refused before its stamp is read. */
START_TEST(test_other_size_refused)
{
	struct sentinel_counters *mapped = NULL;
	int fd = memfd_create("test-counters", MFD_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, sizeof(struct sentinel_counters) - 8), 0);
	ck_assert_int_eq(sentinel_counters_map(fd, &mapped), -EINVAL);
	ck_assert_int_eq(ftruncate(fd, sizeof(struct sentinel_counters)), 0);
	/* the right size, never stamped (all zeros): refused too */
	ck_assert_int_eq(sentinel_counters_map(fd, &mapped), -EPROTO);
	ck_assert_ptr_null(mapped);
	close(fd);
}
END_TEST

/* The fingerprint covers the fields' places: the stamp of this build is
 * stable and is not a constant a reordering would pass. */
START_TEST(test_layout_fingerprint)
{
	ck_assert_uint_eq(sentinel_counters_layout(), sentinel_counters_layout());
	ck_assert_uint_ne(sentinel_counters_layout(), 0);
	ck_assert_uint_ne(sentinel_counters_layout(), sizeof(struct sentinel_counters));
}
END_TEST

static Suite *counters_suite(void)
{
	Suite *s = suite_create("sentinel-counters");
	TCase *tc = check_tcase("stamp", 30);

	tcase_add_test(tc, test_same_layout);
	tcase_add_loop_test(tc, test_other_layout_refused, 0, 3);
	tcase_add_test(tc, test_other_size_refused);
	tcase_add_test(tc, test_layout_fingerprint);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(counters_suite)
