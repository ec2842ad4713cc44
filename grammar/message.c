/* SPDX-License-Identifier: MIT */
/* message.c - the failure message rule (message.h). */
#include "grammar/message.h"

#include <string.h>

size_t message_sanitize(const char *in, char out[static FAILURE_MESSAGE_MAX + 1])
{
	size_t n = in ? strnlen(in, FAILURE_MESSAGE_MAX + 1) : 0;

	if (n > FAILURE_MESSAGE_MAX) {
		n = FAILURE_MESSAGE_MAX;
		/* Back off over continuation bytes to the start of the cut sequence. */
		while (n > 0 && ((unsigned char)in[n] & 0xc0) == 0x80)
			n--;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];
		out[i] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
	}
	out[n] = '\0';
	return n;
}
