/* SPDX-License-Identifier: MIT */
/*
 * parse.h - strict parsers for the small values that users and peers hand us:
 * integers, durations in (fractional) seconds, RFC 3339 timestamps, the ids
 * that name instances.  Every parser rejects trailing garbage, signs and
 * out-of-range values with -EINVAL (or -ERANGE) and writes nothing on failure.
 */
#ifndef VFHEALTH_PARSE_H
#define VFHEALTH_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest RFC 3339 UTC timestamp we produce: 2026-11-29T07:44:51.123456789Z */
#define RFC3339_NANO_LEN 30
#define RFC3339_BUFSZ (RFC3339_NANO_LEN + 1)

/* Instance ids: [A-Za-z0-9._-], 1..128 chars, not starting with '.'. */
#define INSTANCE_ID_MAX 128

/* Decimal unsigned integer in [min, max], canonical: digits only, no sign,
 * no spaces, no leading zero ("0" itself is fine, "01" and "00" are not),
 * so one value has one spelling.  -EINVAL on syntax, -ERANGE when outside
 * [min, max]. */
int parse_uint64(const char *s, uint64_t min, uint64_t max, uint64_t *ret);

/* Seconds as a decimal with an optional fraction ("5", "0.2", "1.25"), into
 * nanoseconds. Must be > 0 and <= max_ns. -EINVAL/-ERANGE. */
int parse_seconds(const char *s, int64_t max_ns, int64_t *ret_ns);

/* The tree's one RFC 3339 parser and formatter (tests/common/test-parse.c).
 * Parse an RFC 3339 UTC timestamp "YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z" (a 'T' or
 * 't', a 'Z' or 'z', no other offset, years 1970-9999) and write its
 * canonical form with exactly nine fraction digits into out. The canonical
 * form is the assignment identity: two spellings of one instant compare
 * equal after normalization. */
int rfc3339_normalize(const char *s, char out[static RFC3339_BUFSZ]);

/* rfc3339_normalize, but NULL or "" is "" (a time not given). */
int rfc3339_normalize_optional(const char *s, char out[static RFC3339_BUFSZ]);

/* Seconds since the epoch of an RFC 3339 UTC timestamp (the fraction
 * dropped).  -EINVAL as rfc3339_normalize. */
int rfc3339_to_unix(const char *s, int64_t *ret);

/* Nanoseconds since the epoch of an RFC 3339 UTC timestamp (any spelling):
 * -EINVAL as rfc3339_normalize, and past int64_t's nanoseconds (2262). */
int rfc3339_to_ns(const char *s, int64_t *ret);

/* The instant of canonical text only (rfc3339_normalize's output, byte for
 * byte), as seconds and nanoseconds: then comparing instants is comparing
 * the text.  -EINVAL for any other spelling, valid or not. */
int rfc3339_canonical_split(const char *s, int64_t *sec, uint32_t *nsec);

/* The current wall-clock time in canonical form. */
void rfc3339_now(char out[static RFC3339_BUFSZ]);

/* Format seconds+nanoseconds since the epoch in canonical form. */
void rfc3339_format(int64_t sec, long nsec, char out[static RFC3339_BUFSZ]);

bool instance_id_valid(const char *s);
/* The rule instance_id_valid() checks, as a refused writer is told it. */
#define PARSE_STR_(x) #x
#define PARSE_STR(x) PARSE_STR_(x) /* a numeric limit spelled in a message */
#define INSTANCE_ID_RULE                   \
	"an instance id is 1.." PARSE_STR( \
		INSTANCE_ID_MAX) " of [A-Za-z0-9._-], not starting with '.'"

/* The tree's one time unit is the nanosecond, in an int64_t. */
#define NSEC_PER_SEC INT64_C(1000000000)

/* Nanoseconds on CLOCK_MONOTONIC. */
int64_t monotonic_ns(void);
/* Nanoseconds since the epoch (CLOCK_REALTIME): to compare with RFC 3339 times. */
int64_t realtime_ns(void);

/* Strip one trailing "\n" (and nothing else) from a buffer of length *len. */
void strip_trailing_newline(char *buf, size_t *len);

#endif
