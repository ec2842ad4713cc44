/* SPDX-License-Identifier: MIT */
/*
 * fuzz-claim.c - the assignment file parser as the filesystem applies it
 * (claim_parse_update in fs/claims.c over grammar/assignment.c, with the
 * pid's start time from /proc): the key=value lines a VMM manager writes to
 * VF/assignments/ID.  The first input byte says whether claimed_at may still
 * change (the first write through the creating handle); the rest is the
 * command.  Invariants: failure leaves the result untouched; an accepted
 * claim has a canonical claimed_at (unchanged unless allowed), an agent that
 * is empty or a canonical endpoint, a control path that is empty or
 * absolute, short and free of control characters, a pid in range; and what
 * assignment_render writes (pid_starttime= included) parses back to the same
 * claim.
 */
#include <errno.h>
#include <stdbool.h>

#include "fs/claims.h"
#include "fs/vfiles.h"
#include "common/cleanup.h"
#include "common/endpoint.h"
#include "tests/fuzz/fuzz.h"

static void check_claim(const struct store_claim *cur, const struct store_claim *c, bool may_set)
{
	char norm[RFC3339_BUFSZ], canon[ENDPOINT_STRING_MAX + 64];
	struct endpoint ep;

	fuzz_check(strcmp(c->a.vf, cur->a.vf) == 0 &&
		   strcmp(c->a.instance_id, cur->a.instance_id) == 0);
	fuzz_check(rfc3339_normalize(c->a.claimed_at, norm) == 0 &&
		   strcmp(norm, c->a.claimed_at) == 0);
	if (!may_set)
		fuzz_check(strcmp(c->a.claimed_at, cur->a.claimed_at) == 0);
	if (c->a.agent[0]) {
		fuzz_check(endpoint_parse(c->a.agent, &ep) == 0);
		fuzz_check(endpoint_format(&ep, canon, sizeof(canon)) == 0);
		fuzz_check(strcmp(canon, c->a.agent) == 0);
	}
	if (c->a.control[0]) {
		fuzz_check(c->a.control[0] == '/' && strlen(c->a.control) < 108);
		for (const char *q = c->a.control; *q; q++)
			fuzz_check((unsigned char)*q >= 0x20 && *q != 0x7f);
	}
	fuzz_check(c->a.pid >= 0 && c->a.pid <= 4194304);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct store_claim cur = {
		.a.vf = "0000:41:00.4",
		.a.instance_id = "vm-1",
		.a.claimed_at = "2026-11-29T07:44:51.123456789Z",
		.id = 7,
	};
	struct store_claim out, untouched, again;
	_cleanup_free_ char *command = NULL, *rendered = NULL;
	size_t rendered_len = 0;
	bool may_set;
	int r;

	if (size < 1 || size > 8192)
		return 0;
	may_set = data[0] & 1;
	command = fuzz_strndup(data + 1, size - 1);
	if (!command)
		return 0;

	fuzz_poison(out, untouched, 0x3c);
	r = claim_parse_update(&cur, command, may_set, &out);
	fuzz_check(r == 0 || r == -EINVAL || r == -ENOMEM);
	if (r < 0) {
		fuzz_untouched(out, untouched);
		return 0;
	}
	check_claim(&cur, &out, may_set);

	/* What a reader sees parses back to the same claim. */
	FILE *f = open_memstream(&rendered, &rendered_len);
	if (!f)
		return 0;
	assignment_render(&out.a, f);
	fclose(f);
	memset(&again, 0, sizeof(again));
	fuzz_check(claim_parse_update(&out, rendered, false, &again) == 0);
	fuzz_check(strcmp(again.a.claimed_at, out.a.claimed_at) == 0);
	fuzz_check(strcmp(again.a.agent, out.a.agent) == 0);
	fuzz_check(strcmp(again.a.control, out.a.control) == 0);
	fuzz_check(again.a.pid == out.a.pid);
	fuzz_check(!out.a.pid || again.a.pid_starttime == out.a.pid_starttime ||
		   !again.a.pid_starttime);
	return 0;
}
