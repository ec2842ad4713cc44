/* SPDX-License-Identifier: MIT */
/*
 * message.h - THE rule for failure messages (the NVRM line a guest agent
 * quotes, as kept by the store and shown in <vf>/failures):
 *
 *   - at most FAILURE_MESSAGE_MAX bytes; a longer message is cut, and a
 *     UTF-8 sequence the cut would split is dropped whole;
 *   - every control character (0x00-0x1f, 0x7f) becomes a space, so a
 *     message is one line wherever it is shown or written;
 *   - every byte that starts no well-formed UTF-8 sequence (RFC 3629: no
 *     overlong form, no surrogate, nothing past U+10FFFF) becomes U+FFFD,
 *     so what is stored and logged is valid UTF-8.
 *
 * The store applies it to what it keeps; the sentinel applies it to what it
 * reports (report_format_failed(), which also trims the spaces around it).
 * The daemon's log of an accepted command goes through the same rule
 * (message_sanitize_to).  Test: tests/grammar/test-grammar.c
 * (test_message_sanitize, test_message_utf8).
 */
#ifndef VFHEALTH_GRAMMAR_MESSAGE_H
#define VFHEALTH_GRAMMAR_MESSAGE_H

#include <stddef.h>

#include "grammar/limits.h"

/* Write the sanitized in (NULL: "") to out; returns its length. */
size_t message_sanitize(const char *in, char out[static FAILURE_MESSAGE_MAX + 1]);
/* The same rule into out[out_size] (out_size > 0): cut to out_size - 1
 * bytes, never inside a sequence. */
size_t message_sanitize_to(const char *in, char *out, size_t out_size);

#endif
