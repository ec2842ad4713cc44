/* SPDX-License-Identifier: MIT */
/*
 * futex.h - sleeping on a 32-bit word until another thread changes it,
 * for the waits that need no lock of their own (store/commit.c,
 * fs/handle.c).  The waker changes the word first, then wakes; the sleeper
 * returns only once the word differs from what it saw, so no wake-up is
 * missed and a spurious one costs a recheck.  A wake writes no memory: it
 * may find the word's memory reused already, which at worst wakes some
 * other futex waiter once, and every futex wait rechecks what it waits for.
 */
#ifndef VFHEALTH_FUTEX_H
#define VFHEALTH_FUTEX_H

#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Sleep while *word is seen. */
static inline void futex_sleep(atomic_uint *word, unsigned seen)
{
	while (atomic_load(word) == seen)
		(void)syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

/* Wake up to n sleepers on word (after changing it). */
static inline void futex_wake(atomic_uint *word, int n)
{
	(void)syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

#endif
