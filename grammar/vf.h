/* SPDX-License-Identifier: MIT */
/*
 * vf.h - THE rule for VF addresses, the names of the VF directories under
 * /run/vfhealth and the key of every VF in the store:
 *
 *     ^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$
 *
 * lowercase, as sysfs names PCI functions ("0000:41:00.4").  Anything else,
 * NULL included, is not a VF.  Test: tests/grammar/test-grammar.c.
 */
#ifndef VFHEALTH_GRAMMAR_VF_H
#define VFHEALTH_GRAMMAR_VF_H

#include <stdbool.h>

#include "grammar/limits.h"

bool vf_address_valid(const char *s);

#endif
