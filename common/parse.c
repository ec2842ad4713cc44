/* SPDX-License-Identifier: MIT */
/* parse.c - the strict parsers every user- or peer-given value goes through (parse.h). */
#include "common/parse.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int parse_uint64(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
	uint64_t v = 0;

	if (!s || !*s || (s[0] == '0' && s[1]))
		return -EINVAL; /* canonical only: "0", never "00" or "01" */
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (v < min || v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

int parse_seconds(const char *s, int64_t max_ns, int64_t *ret_ns)
{
	int64_t whole = 0, frac = 0, scale = NSEC_PER_SEC;
	const char *p = s;
	bool digits = false;

	if (!s || !*s)
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		digits = true;
		whole = whole * 10 + (*p - '0');
		if (whole > max_ns / NSEC_PER_SEC + 1)
			return -ERANGE;
	}
	if (*p == '.') {
		p++;
		for (; *p >= '0' && *p <= '9'; p++) {
			digits = true;
			if (scale > 1) {
				scale /= 10;
				frac += (*p - '0') * scale;
			}
		}
	}
	if (*p || !digits)
		return -EINVAL;
	if (whole > INT64_MAX / NSEC_PER_SEC)
		return -ERANGE;
	int64_t ns = whole * NSEC_PER_SEC + frac;
	if (ns <= 0 || ns > max_ns)
		return -ERANGE;
	*ret_ns = ns;
	return 0;
}

static int digits_at(const char *s, int n, int *ret)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (s[i] - '0');
	}
	*ret = v;
	return 0;
}

static bool leap_year(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Days from 1970-01-01 to the given proleptic Gregorian date: arithmetic,
 * not timegm(), so that no time zone or time_t width enters. */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
	y -= m <= 2;
	int64_t era = y / 400; /* y >= 1969 here: no negative division */
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

/* One parsed time: its fields, each range-checked. */
struct rfc3339 {
	int Y, M, D, h, m, sec;
	long nsec;
	bool canonical; /* spelled exactly as rfc3339_normalize writes it */
};

/* The one parser of RFC 3339 text: "YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z". */
static int rfc3339_parse(const char *s, struct rfc3339 *t)
{
	static const int mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	const char *p;

	if (!s || strnlen(s, 64) < 20)
		return -EINVAL;
	if (digits_at(s, 4, &t->Y) || s[4] != '-' || digits_at(s + 5, 2, &t->M) || s[7] != '-' ||
	    digits_at(s + 8, 2, &t->D) || (s[10] != 'T' && s[10] != 't') ||
	    digits_at(s + 11, 2, &t->h) || s[13] != ':' || digits_at(s + 14, 2, &t->m) ||
	    s[16] != ':' || digits_at(s + 17, 2, &t->sec))
		return -EINVAL;
	p = s + 19;
	t->nsec = 0;
	if (*p == '.') {
		long scale = 100000000;
		int n = 0;
		for (p++; *p >= '0' && *p <= '9'; p++, n++) {
			if (n >= 9)
				return -EINVAL;
			t->nsec += (*p - '0') * scale;
			scale /= 10;
		}
		if (n == 0)
			return -EINVAL;
	}
	if ((*p != 'Z' && *p != 'z') || p[1])
		return -EINVAL;
	if (t->Y < 1970 || t->M < 1 || t->M > 12 || t->D < 1 || t->h > 23 || t->m > 59 ||
	    t->sec > 59)
		return -EINVAL;
	if (t->D > mdays[t->M - 1] + (t->M == 2 && leap_year(t->Y)))
		return -EINVAL;
	/* nine fraction digits (the '.' at 19 and the 'Z' at 29), capitals */
	t->canonical = p - s == RFC3339_NANO_LEN - 1 && s[19] == '.' && s[10] == 'T' && *p == 'Z';
	return 0;
}

static int64_t rfc3339_seconds(const struct rfc3339 *t)
{
	return days_from_civil(t->Y, t->M, t->D) * 86400 + (int64_t)t->h * 3600 +
	       (int64_t)t->m * 60 + t->sec;
}

/* Fields are range-checked by the callers; the wide scratch buffer keeps the
 * compiler's truncation analysis honest without a cast at every call. */
static void format_canonical(int Y, int M, int D, int h, int m, int sec, long nsec,
			     char out[static RFC3339_BUFSZ])
{
	char tmp[96];

	snprintf(tmp, sizeof(tmp), "%04d-%02d-%02dT%02d:%02d:%02d.%09ldZ", Y % 10000, M, D, h, m,
		 sec, nsec % NSEC_PER_SEC);
	memcpy(out, tmp, RFC3339_BUFSZ - 1);
	out[RFC3339_BUFSZ - 1] = '\0';
}

int rfc3339_normalize(const char *s, char out[static RFC3339_BUFSZ])
{
	struct rfc3339 t;

	if (rfc3339_parse(s, &t) < 0)
		return -EINVAL;
	format_canonical(t.Y, t.M, t.D, t.h, t.m, t.sec, t.nsec, out);
	return 0;
}

int rfc3339_normalize_optional(const char *s, char out[static RFC3339_BUFSZ])
{
	if (!s || !*s) {
		out[0] = '\0';
		return 0;
	}
	return rfc3339_normalize(s, out);
}

int rfc3339_to_unix(const char *s, int64_t *ret)
{
	struct rfc3339 t;

	if (rfc3339_parse(s, &t) < 0)
		return -EINVAL;
	*ret = rfc3339_seconds(&t);
	return 0;
}

int rfc3339_to_ns(const char *s, int64_t *ret)
{
	struct rfc3339 t;
	int64_t ns;

	if (rfc3339_parse(s, &t) < 0)
		return -EINVAL;
	/* past 2262 the nanoseconds leave int64_t: no time this project keeps */
	if (__builtin_mul_overflow(rfc3339_seconds(&t), NSEC_PER_SEC, &ns) ||
	    __builtin_add_overflow(ns, (int64_t)t.nsec, &ns))
		return -EINVAL;
	*ret = ns;
	return 0;
}

int rfc3339_canonical_split(const char *s, int64_t *sec, uint32_t *nsec)
{
	struct rfc3339 t;

	if (rfc3339_parse(s, &t) < 0 || !t.canonical)
		return -EINVAL;
	*sec = rfc3339_seconds(&t);
	*nsec = (uint32_t)t.nsec;
	return 0;
}

void rfc3339_format(int64_t sec, long nsec, char out[static RFC3339_BUFSZ])
{
	struct tm tm;
	time_t t = (time_t)sec;

	gmtime_r(&t, &tm);
	format_canonical(tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			 tm.tm_sec, nsec, out);
}

void rfc3339_now(char out[static RFC3339_BUFSZ])
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	rfc3339_format(ts.tv_sec, ts.tv_nsec, out);
}

bool instance_id_valid(const char *s)
{
	size_t n = 0;

	if (!s || !*s || *s == '.')
		return false;
	for (; s[n]; n++) {
		char c = s[n];
		if (n >= INSTANCE_ID_MAX)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

int64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

int64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

void strip_trailing_newline(char *buf, size_t *len)
{
	if (*len > 0 && buf[*len - 1] == '\n')
		buf[--*len] = '\0';
}
