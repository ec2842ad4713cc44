/* SPDX-License-Identifier: MIT */
/* message.c - the failure message rule (message.h). */
#include "grammar/message.h"

#include <string.h>

/* U+FFFD REPLACEMENT CHARACTER */
static const char replacement[] = "\xef\xbf\xbd";

/* The length of the well-formed UTF-8 sequence at p (at most avail bytes
 * before the NUL), 0 when it is not one (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF). */
static size_t utf8_sequence(const unsigned char *p, size_t avail)
{
	unsigned char c = p[0];
	size_t len;
	unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0; /* overlong */
	else if (c == 0xed)
		hi = 0x9f; /* surrogates */
	else if (c == 0xf0)
		lo = 0x90; /* overlong */
	else if (c == 0xf4)
		hi = 0x8f; /* past U+10FFFF */
	if (avail < len || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return len;
}

size_t message_sanitize_to(const char *in, char *out, size_t out_size)
{
	const unsigned char *p = (const unsigned char *)(in ? in : "");
	size_t n = 0, left = strlen((const char *)p);

	if (out_size == 0)
		return 0;
	while (left > 0) {
		size_t len = utf8_sequence(p, left);
		const char *src = (const char *)p;
		size_t take = len, emit = len;

		if (len == 0) {
			/* one byte that starts no well-formed sequence */
			src = replacement;
			take = 1;
			emit = sizeof(replacement) - 1;
		}
		if (n + emit > out_size - 1)
			break; /* cut before a sequence, never inside one */
		if (len == 1 && (*p < 0x20 || *p == 0x7f))
			out[n] = ' ';
		else
			memcpy(out + n, src, emit);
		n += emit;
		p += take;
		left -= take;
	}
	out[n] = '\0';
	return n;
}

size_t message_sanitize(const char *in, char out[static FAILURE_MESSAGE_MAX + 1])
{
	return message_sanitize_to(in, out, FAILURE_MESSAGE_MAX + 1);
}
