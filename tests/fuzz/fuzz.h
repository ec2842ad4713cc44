/* SPDX-License-Identifier: MIT */
/*
 * fuzz.h - what every fuzz target shares: the libFuzzer entry point and a
 * check that aborts with a message, so that a violated invariant is a crash
 * libFuzzer keeps and the replay test reports.
 */
#ifndef VFHEALTH_FUZZ_H
#define VFHEALTH_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond)                                                                     \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, \
				#cond);                                                      \
			abort();                                                             \
		}                                                                            \
	} while (0)

/* OBJ filled with BYTE and SAVED a copy of it, so that fuzz_untouched can
 * check that a refusal left OBJ as it was. */
#define fuzz_poison(obj, saved, byte)                  \
	do {                                           \
		memset(&(obj), (byte), sizeof(obj));   \
		memcpy(&(saved), &(obj), sizeof(obj)); \
	} while (0)
#define fuzz_untouched(obj, saved) fuzz_check(memcmp(&(obj), &(saved), sizeof(obj)) == 0)

/* A NUL-terminated heap copy of the input (NULL on ENOMEM), exactly sized so
 * that ASan catches a parser that reads past the terminator. */
static inline char *fuzz_strndup(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (s) {
		memcpy(s, data, size);
		s[size] = '\0';
	}
	return s;
}

#endif
