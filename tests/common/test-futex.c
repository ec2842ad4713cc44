/* SPDX-License-Identifier: MIT */
/*
 * test-futex.c - common/futex.h: no wake is lost, though a waker calls the
 * kernel only when a thread sleeps on the word (two threads hand a turn
 * back and forth through two words, each sleeping on its own, many times:
 * one lost wake leaves both asleep until the case's timeout); a sleep on
 * a word that has changed returns at once; and a wake nobody sleeps for
 * is still counted until it is done, so the word's owner leaves after it.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "common/futex.h"
#include "tests/common/check-main.h"

#define TURNS 100000

struct turns {
	struct futex_word mine, theirs;
};

/* Wait for the other side's turn (its post on `theirs`), then hand ours
 * over (a post on `mine`): `turns` times. */
static void take_turns(struct futex_word *mine, struct futex_word *theirs, unsigned turns,
		       bool first)
{
	for (unsigned i = 0; i < turns; i++) {
		if (!first || i > 0) {
			/* the other side's i-th post (first: its (i-1)-th) */
			unsigned want = first ? i : i + 1;
			unsigned seen;
			while ((seen = atomic_load(&theirs->word)) < want)
				futex_sleep(theirs, seen);
		}
		futex_post(mine);
		futex_post_wake(mine);
	}
}

static void *second_side(void *arg)
{
	struct turns *t = arg;

	take_turns(&t->theirs, &t->mine, TURNS, false);
	return NULL;
}

START_TEST(test_no_wake_is_lost)
{
	struct turns t = { 0 };
	pthread_t thread;

	ck_assert_int_eq(pthread_create(&thread, NULL, second_side, &t), 0);
	take_turns(&t.mine, &t.theirs, TURNS, true);
	ck_assert_int_eq(pthread_join(thread, NULL), 0);
	ck_assert_uint_eq(atomic_load(&t.mine.word), TURNS);
	ck_assert_uint_eq(atomic_load(&t.theirs.word), TURNS);
	/* every sleeper left, every wake was done */
	ck_assert_uint_eq(atomic_load(&t.mine.sleepers) + atomic_load(&t.theirs.sleepers), 0);
	ck_assert_uint_eq(atomic_load(&t.mine.waking) + atomic_load(&t.theirs.waking), 0);
}
END_TEST

START_TEST(test_a_changed_word_is_not_slept_on)
{
	struct futex_word f = { 0 };
	unsigned seen = atomic_load(&f.word);

	futex_post(&f);
	futex_post_wake(&f); /* nobody sleeps: no wake made, and none counted */
	ck_assert_uint_eq(atomic_load(&f.waking), 0);
	futex_sleep(&f, seen); /* returns: the word is not what was seen */
	ck_assert_uint_eq(atomic_load(&f.word), seen + 1);
	ck_assert_uint_eq(atomic_load(&f.sleepers), 0);
}
END_TEST

START_TEST(test_a_wake_is_counted_until_done)
{
	struct futex_word f = { 0 };

	futex_post(&f);
	ck_assert_uint_eq(atomic_load(&f.waking), 1); /* futex_leave() would wait */
	futex_post_wake(&f);
	ck_assert_uint_eq(atomic_load(&f.waking), 0);
	futex_leave(&f); /* returns */
}
END_TEST

static const struct check_case futex_case = {
	.suite = "futex",
	.tcase = "futex",
	.timeout = 60,
};
CHECK_CASE_MAIN(futex_case, test_no_wake_is_lost, test_a_changed_word_is_not_slept_on,
		test_a_wake_is_counted_until_done)
