/* SPDX-License-Identifier: MIT */
/*
 * fuzz-endpoint.c - endpoint_parse / endpoint_parse_listen (common/endpoint.c),
 * which see the agent= key of every assignment file and the agent's --listen.
 * Invariants: failure writes nothing; an accepted endpoint formats to a
 * canonical string that parses back to the same endpoint and is a fixed
 * point of format(parse(.)); a path never holds a newline (the files that
 * record it are line-oriented); the client form never accepts "any".
 */
#include <errno.h>
#include <stdbool.h>

#include "common/cleanup.h"
#include "common/endpoint.h"
#include "tests/fuzz/fuzz.h"

static void check_endpoint(const char *s, bool listen)
{
	struct endpoint e, e2, untouched;
	char canon[ENDPOINT_STRING_MAX + 64], canon2[ENDPOINT_STRING_MAX + 64];
	int r;

	memset(&e, 0xa5, sizeof(e));
	memset(&untouched, 0xa5, sizeof(untouched));
	r = listen ? endpoint_parse_listen(s, &e) : endpoint_parse(s, &e);
	fuzz_check(r == 0 || r == -EINVAL);
	if (r < 0) {
		fuzz_untouched(e, untouched);
		return;
	}
	fuzz_check(e.kind == ENDPOINT_VSOCK || e.kind == ENDPOINT_HVSOCK ||
		   e.kind == ENDPOINT_UNIX);
	if (e.kind != ENDPOINT_VSOCK) {
		fuzz_check(e.path[0] == '/');
		fuzz_check(strnlen(e.path, sizeof(e.path)) < sizeof(e.path));
		fuzz_check(!strchr(e.path, '\n'));
	}
	if (e.kind != ENDPOINT_UNIX)
		fuzz_check(e.port != 0 && e.port != UINT32_MAX);
	if (!listen)
		fuzz_check(e.kind != ENDPOINT_VSOCK || e.cid != UINT32_MAX);
	else
		fuzz_check(e.kind != ENDPOINT_HVSOCK);

	fuzz_check(endpoint_format(&e, canon, sizeof(canon)) == 0);
	fuzz_check(strlen(canon) <= ENDPOINT_STRING_MAX);
	memset(&e2, 0, sizeof(e2));
	r = listen ? endpoint_parse_listen(canon, &e2) : endpoint_parse(canon, &e2);
	fuzz_check(r == 0);
	fuzz_check(e2.kind == e.kind);
	if (e.kind == ENDPOINT_VSOCK)
		fuzz_check(e2.cid == e.cid && e2.port == e.port);
	if (e.kind == ENDPOINT_HVSOCK)
		fuzz_check(e2.port == e.port);
	if (e.kind != ENDPOINT_VSOCK)
		fuzz_check(strcmp(e2.path, e.path) == 0);
	fuzz_check(endpoint_format(&e2, canon2, sizeof(canon2)) == 0);
	fuzz_check(strcmp(canon, canon2) == 0);
	/* A buffer one byte short is refused, never silently truncated. */
	fuzz_check(endpoint_format(&e, canon2, strlen(canon)) == -ENOBUFS);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *s = fuzz_strndup(data, size);

	if (!s)
		return 0;
	check_endpoint(s, false);
	check_endpoint(s, true);
	return 0;
}
