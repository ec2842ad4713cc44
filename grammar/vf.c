/* SPDX-License-Identifier: MIT */
/* vf.c - the VF address rule (vf.h). */
#include "grammar/vf.h"

#include <string.h>

bool vf_address_valid(const char *s)
{
	/* x: a lowercase hex digit; o: a function number 0..7. */
	static const char shape[VF_ADDR_BUFSZ] = "xxxx:xx:xx.o";

	if (!s || strnlen(s, VF_ADDR_BUFSZ) != VF_ADDR_LEN)
		return false;
	for (size_t i = 0; i < VF_ADDR_LEN; i++) {
		char c = s[i];

		switch (shape[i]) {
		case 'x':
			if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
				return false;
			break;
		case 'o':
			if (c < '0' || c > '7')
				return false;
			break;
		default:
			if (c != shape[i])
				return false;
		}
	}
	return true;
}
