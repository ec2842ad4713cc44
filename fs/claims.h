/* SPDX-License-Identifier: MIT */
/*
 * claims.h - the assignment files, <vf>/assignments/<instance> (vfhealth(5)):
 * how what a writer sends through one open file becomes one claim, whole or
 * not at all, over the store's claim API (store.h: Claims, Reservations).
 *
 * One open claim file is a struct claim_handle in one of the states of
 * enum claim_state; claim_next() is every transition:
 *
 *   create ----------------> RESERVED          (store_claim_reserve: EBUSY,
 *   open of a claim -------> OPEN               EEXIST at once)
 *   RESERVED --write--> RESERVED_STAGED        a good line is staged in the
 *   MADE     --write--> MADE_STAGED            handle, checked at once
 *   OPEN     --write--> STAGED
 *   RESERVED, OPEN, MADE, RELEASE_STAGED       release=CLAIMED_AT (with
 *        --write release--> RELEASE_STAGED     ended=, died_at=) is staged
 *                                              too; what is staged stays
 *                                              one release command; a
 *                                              reservation (a shell's
 *                                              O_CREAT of a claim gone) is
 *                                              cancelled at once
 *   others   --write release--> POISONED       mixed with a claim's lines
 *   any      --bad line--> POISONED            EINVAL now; nothing is
 *                                              committed from the handle any
 *                                              more: its reservation is
 *                                              cancelled, a claim it made is
 *                                              released, later writes and the
 *                                              next close get EINVAL (later
 *                                              closes are a reader's: 0)
 *   RESERVED_STAGED, MADE_STAGED --FLUSH--> MADE  the claim with every staged
 *   STAGED                       --FLUSH--> OPEN  line, or an update; close(2)
 *                                              returns FLUSH's error;
 *                                              refused: POISONED
 *   RELEASE_STAGED --FLUSH--> OPEN             the release (a claim already
 *                                              released with that claimed_at:
 *                                              done, its outcome says so);
 *                                              refused: POISONED
 *   *_STAGED --FLUSH, not whole yet--> (same)  agent= without its VMM yet:
 *                                              EINVAL (once for what is
 *                                              staged), kept staged (a close
 *                                              of a dup'd descriptor, such as
 *                                              a shell's `>&7`, flushes
 *                                              between lines)
 *   RESERVED, MADE, OPEN --FLUSH--> (same)     nothing staged, nothing done
 *                                              (a shell's dup2+close flushes
 *                                              before it writes)
 *   RESERVED --RELEASE--> (gone)               a bare claim:
 *                                              store_claim_abandon() commits
 *                                              it or, while the store cannot,
 *                                              keeps it until it can
 *   *_STAGED --RELEASE--> (gone)               committed as at FLUSH; not
 *                                              whole: as a bad line
 *   others   --RELEASE--> (gone)               nothing
 *
 * FLUSH comes with every close(2) of any descriptor of the open file, so a
 * writer that closes duplicates between lines has each line committed by
 * its own close; a bad line later still leaves nothing it made.  bash's
 * echo writes one line per write(2), dash's one write: both stage the whole
 * release before the close that commits it.
 *
 * The outcome.  Every refusal (of a line, of the claim or the release at
 * FLUSH) and every release leaves its outcome in the handle, one line
 * (`refused ERRNO: WHY`, `released CLAIMED_AT`, `already released CLAIMED_AT
 * ended=HOW [newer=CLAIMED_AT]`, the last naming the instance's live claim
 * made since), logged too; a read through the same open file shows it (at
 * offset 0, or at the offset its writes reached, so a shell's `cat <&3`
 * after `echo ... >&3` sees it, and so the claim when there is none); a
 * committed claim clears it, and the claim reads again.  The unwatched
 * notice (a claim without agent=) is said at the last close, of what the
 * open file left.  Tests: tests/fs/test-vfiles.c (test_claim_states:
 * claim_next(), every transition), tests/fs/test-claim-whole.sh (the
 * transitions on a real mount, bash and dash),
 * tests/fs/test-claim-release.sh (releases staged and repeated, outcomes
 * read back, EBUSY's reasons), tests/fs/test-claim-lifecycle.sh,
 * tests/fs/test-claims.sh.
 *
 * Locks: none of its own; a handle is used under its vhandle's mutex
 * (vffs-internal.h), the store takes its own.
 */
#ifndef VFHEALTH_FS_CLAIMS_H
#define VFHEALTH_FS_CLAIMS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "grammar/limits.h"
#include "store/store.h"

struct sockdirs;

/* An outcome line: a refusal's reason is at most a rule's text and a path. */
#define CLAIM_OUTCOME_MAX 768

enum claim_state {
	CLAIM_RESERVED,        /* created here; nothing staged: RELEASE commits it bare */
	CLAIM_RESERVED_STAGED, /* created here; lines staged: FLUSH makes the claim */
	CLAIM_MADE,            /* created here and committed; nothing staged */
	CLAIM_MADE_STAGED,     /* created here and committed; lines staged: FLUSH updates */
	CLAIM_OPEN,            /* nothing staged (a claim, or another open's reservation) */
	CLAIM_STAGED,          /* lines staged: FLUSH commits or updates */
	CLAIM_RELEASE_STAGED,  /* a release= command staged: FLUSH releases */
	CLAIM_POISONED,        /* a line was refused: nothing is committed from here */
};

enum claim_event {
	CLAIM_EV_STAGE,         /* a good line was staged */
	CLAIM_EV_STAGE_RELEASE, /* a release= command was staged */
	CLAIM_EV_REFUSE,        /* a line, or the staged claim at FLUSH, was refused */
	CLAIM_EV_COMMIT,        /* FLUSH committed what was staged */
	CLAIM_EV_INCOMPLETE,    /* FLUSH: not a whole claim yet (agent= without its VMM) */
	CLAIM_EV_RELEASED,      /* release= went through */
};

/* The state after ev in s (the table above). */
enum claim_state claim_next(enum claim_state s, enum claim_event ev);

/* The context every claim operation needs. */
struct claims {
	struct store *store;
	const struct sockdirs *socket_dirs; /* where claims' socket paths may point */
};

struct claim_handle {
	enum claim_state state;
	char vf[VF_ADDR_BUFSZ];
	uint64_t vf_id;
	char instance_id[INSTANCE_ID_MAX + 1];
	uint64_t claim_id;
	char made_at[RFC3339_BUFSZ]; /* MADE*: the claimed_at it committed */
	char *staged;                /* the lines written since the last FLUSH, NUL-terminated */
	size_t staged_len;
	uint64_t written; /* bytes accepted through the handle: the next write's offset */
	uid_t uid;        /* who opened it (RELEASE carries no credentials) */
	pid_t pid;
	bool committed; /* this open committed a claim: the unwatched notice is its last close's */
	bool refusal_told;               /* POISONED: a FLUSH has returned the refusal */
	bool incomplete_told;            /* what is staged: a FLUSH has said it is not whole */
	char outcome[CLAIM_OUTCOME_MAX]; /* the last refusal or release, "" when none */
	uint64_t read_base;              /* the offset its last fresh read started at */
};

/* Make the claim (reserve: only reserve it, for a create) of instance on
 * vf: 0 with *ret the claim or reservation, or -errno (EINVAL for a bad
 * name, the store's refusals otherwise, logged). */
int claims_make(const struct claims *c, const struct store_vf_info *vf, const char *instance,
		bool reserve, struct store_claim *ret);

/* A handle on claim, of the VF with store id vf_id (0: unknown, looked up
 * by a scan), created: this open made its reservation. */
void claim_handle_init(struct claim_handle *h, const struct store_claim *claim, uint64_t vf_id,
		       bool created, uid_t uid, pid_t pid);
void claim_handle_free(struct claim_handle *h);

/* Parse and validate `key=value` lines (grammar/assignment.h) into a copy of
 * `current`; touches nothing else.  may_set_claimed_at: the claim is still
 * the reservation this open made, so claimed_at may change; else it must
 * equal the stored one.  A write of pid= records the process's start time
 * (pid_starttime, 0 when /proc cannot tell).  -EINVAL for unknown or
 * repeated keys and bad values. */
int claim_parse_update(const struct store_claim *current, const char *text, bool may_set_claimed_at,
		       struct store_claim *ret);

/* The assignment file of the claim h names, by its name. */
int claims_render(const struct claims *c, const struct claim_handle *h, FILE *out);

/* A write(2) of size bytes at off (append: O_APPEND) by uid/pid: 0 (staged,
 * or a release done) or -errno; *why the rule a refusal broke, for the log. */
int claims_write(const struct claims *c, struct claim_handle *h, const char *buf, size_t size,
		 uint64_t off, bool append, uid_t uid, pid_t pid, const char **why);

/* FLUSH (every close(2) of a descriptor): commit what is staged.  0 or the
 * errno close(2) returns. */
int claims_flush(const struct claims *c, struct claim_handle *h);

/* RELEASE (the last close): a bare reservation is committed, anything
 * left staged is committed as at FLUSH, a poisoned reservation is gone. */
void claims_release(const struct claims *c, struct claim_handle *h);

/* A read at the descriptor's offset off through h: the offset into what
 * it reads (the outcome, or the claim), or -1 (nothing: end of file).  A
 * read from offset 0, or from where h's writes left the offset, starts
 * afresh (claims.h, "The outcome"). */
int64_t claims_read_offset(struct claim_handle *h, uint64_t off);

/* size bytes of h's outcome line (with its newline) from off into buf:
 * 0 with *len (0 past its end). */
int claims_read_outcome(const struct claim_handle *h, uint64_t off, size_t size, char *buf,
			size_t *len);

/* rm of vf/assignments/instance by uid/pid: release it unless its VMM may
 * still run (-EBUSY, logged with how to release it).  A reservation and a
 * claim naming neither pid= nor control= are released; a claim naming a
 * VMM only once the kernel shows that VMM gone (the pid gone, a zombie, or
 * another process by start time or boot id; never with control= alone,
 * which may be bound later).  Anything unknown refuses.  Released only while the
 * claim still names the VMM judged (store_release_opts.if_vmm).  Test:
 * tests/fs/test-claim-rm.sh. */
int claims_unlink(const struct claims *c, const char *vf, const char *instance, uid_t uid,
		  pid_t pid);

#endif
