/* SPDX-License-Identifier: MIT */
/*
 * futex.h - sleeping on a 32-bit word until another thread changes it,
 * for the waits that need no lock of their own (store/commit.c,
 * fs/handle.c).  The waker changes the word first, then wakes; the sleeper
 * returns only once the word differs from what it saw, so no wake-up is
 * missed and a spurious one costs a recheck.
 *
 * A word whose memory goes when its owner returns (a waiter's, on its
 * stack) is a struct futex_word: the waker counts its wake in `waking`
 * when it changes the word (futex_post) and uncounts it after the wake
 * (futex_post_wake), and the owner, before its memory goes, waits until
 * no wake is counted (futex_leave), a window of one system call: so no
 * wake reaches memory that is gone or reused.
 *
 * A wake is a system call only when a thread sleeps on the word: a
 * sleeper counts itself in `sleepers` before it looks at the word a last
 * time, and the waker looks at `sleepers` after it changed the word (both
 * sequentially consistent), so either the sleeper sees the change or the
 * waker sees the sleeper.  A committer or answerer that is busy, and a
 * stop nobody waits for yet, cost no system call per batch or report.
 */
#ifndef VFHEALTH_FUTEX_H
#define VFHEALTH_FUTEX_H

#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

struct futex_word {
	atomic_uint word;
	atomic_uint waking;   /* wakes counted and not yet done */
	atomic_uint sleepers; /* threads in futex_sleep() */
};

/* Sleep while f's word is seen. */
static inline void futex_sleep(struct futex_word *f, unsigned seen)
{
	while (atomic_load(&f->word) == seen) {
		atomic_fetch_add(&f->sleepers, 1);
		if (atomic_load(&f->word) == seen)
			(void)syscall(SYS_futex, &f->word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
		atomic_fetch_sub(&f->sleepers, 1);
	}
}

/* Change f's word, counting the wake futex_post_wake() will do. */
static inline void futex_post(struct futex_word *f)
{
	atomic_fetch_add(&f->waking, 1);
	atomic_fetch_add(&f->word, 1);
}

/* The wake futex_post() counted: of one sleeper, if any sleeps; f's
 * memory is the owner's again after it. */
static inline void futex_post_wake(struct futex_word *f)
{
	if (atomic_load(&f->sleepers))
		(void)syscall(SYS_futex, &f->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	atomic_fetch_sub_explicit(&f->waking, 1, memory_order_release);
}

/* The owner of f, before f's memory goes: wait for the wakes counted. */
static inline void futex_leave(struct futex_word *f)
{
	while (atomic_load_explicit(&f->waking, memory_order_acquire))
		sched_yield();
}

#endif
