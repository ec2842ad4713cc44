/* SPDX-License-Identifier: MIT */
/*
 * fuzz-parse.c - the strict value parsers every control-file write goes
 * through (common/parse.c): integers, seconds, RFC 3339 timestamps, instance
 * ids.  Beyond "no crash", it checks what the parsers promise: nothing is
 * written on failure, a parsed value formats back to an accepted string, and
 * the canonical timestamp is a fixed point of normalization.
 */
#include <errno.h>
#include <inttypes.h>

#include "common/cleanup.h"
#include "common/parse.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *s = fuzz_strndup(data, size);
	char again[32];
	char out[RFC3339_BUFSZ], out2[RFC3339_BUFSZ];
	uint64_t v = 0xdeadbeef, v2;
	int64_t ns = -7;
	int r;

	if (!s)
		return 0;

	r = parse_uint64(s, 0, UINT64_MAX, &v);
	fuzz_check(r == 0 || r == -EINVAL || r == -ERANGE);
	if (r == 0) {
		snprintf(again, sizeof(again), "%" PRIu64, v);
		fuzz_check(parse_uint64(again, 0, UINT64_MAX, &v2) == 0 && v2 == v);
		fuzz_check(strcmp(again, s) == 0); /* canonical: one spelling per value */
		/* Bounds are inclusive and enforced. */
		fuzz_check(parse_uint64(s, v, v, &v2) == 0 && v2 == v);
		if (v > 0)
			fuzz_check(parse_uint64(s, 0, v - 1, &v2) == -ERANGE);
	} else {
		fuzz_check(v == 0xdeadbeef);
	}

	r = parse_seconds(s, 3600LL * 1000000000, &ns);
	fuzz_check(r == 0 || r == -EINVAL || r == -ERANGE);
	if (r == 0)
		fuzz_check(ns > 0 && ns <= 3600LL * 1000000000);
	else
		fuzz_check(ns == -7);

	memset(out, 'x', sizeof(out));
	r = rfc3339_normalize(s, out);
	fuzz_check(r == 0 || r == -EINVAL || r == -ERANGE);
	if (r == 0) {
		fuzz_check(strlen(out) == RFC3339_NANO_LEN);
		fuzz_check(rfc3339_normalize(out, out2) == 0);
		fuzz_check(strcmp(out, out2) == 0);
	}

	if (instance_id_valid(s)) {
		fuzz_check(strlen(s) >= 1 && strlen(s) <= INSTANCE_ID_MAX && s[0] != '.');
		fuzz_check(strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				     "0123456789._-") == strlen(s));
	}
	return 0;
}
