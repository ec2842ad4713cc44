/* SPDX-License-Identifier: MIT */
/*
 * assignment.h - THE grammar of an assignment file, <vf>/assignments/<id>:
 * one claim of a VF by an instance.  One key table drives the renderer
 * (vfhealthd), the reader (the sentinel) and the writers' parser (a VMM
 * manager writing to the file).  Tests (render -> parse -> render is the
 * identity, and every rejection): tests/grammar/test-grammar.c.
 *
 * The file is "key=value" lines, rendered in this order, each key once:
 *
 *   claimed_at=     RFC 3339 UTC, canonical (nine fraction digits): the
 *                   assignment identity.  Writers: only the open that
 *                   created the claim may change it, before its close (the
 *                   caller says so: may_set_claimed_at).
 *   agent=          the guest agent's endpoint (common/endpoint.h), at most
 *                   AGENT_ENDPOINT_MAX bytes; writers' values are stored
 *                   canonical (port spelled out).  Empty: none.
 *   control=        the VMM's control socket: an absolute path of at most
 *                   CONTROL_PATH_MAX bytes without control characters.
 *   pid=            the VMM's pid, 1..PID_VALUE_MAX.  Empty: none.
 *   pid_starttime=  field 22 of /proc/PID/stat, recorded by the daemon when
 *                   pid= is written (common/procfs.h): with the pid it names
 *                   one process even after the pid is reused.  Empty:
 *                   unknown.  Writers may not set it: a write may repeat
 *                   the recorded value (so what was read can be written
 *                   back), any other value is -EINVAL.
 *   boot_id=        the host's boot id when the claim was made
 *                   (common/procfs.h), recorded by the daemon: with pid and
 *                   pid_starttime it names one process across reboots.
 *                   Empty: unknown.  Writers may only repeat it, like
 *                   pid_starttime.
 *
 * Command keys are written, never rendered: a release is the release=
 * line, with ended= and died_at= at most, and no key of the file.
 *
 *   release=        CLAIMED_AT (any RFC 3339 spelling): release the claim iff
 *                   its claimed_at is that instant (assignment_parse_release).
 *   ended=          crash: said with release= only: the claim ended because
 *                   its VMM died (killed or crashed), not by its manager's
 *                   choice.  A death within the init window after
 *                   claimed_at makes the VF suspect (store.h, Suspect).
 *   died_at=        RFC 3339: said with ended=crash only, when the VMM was
 *                   known dead (the sentinel: its first dead verdict);
 *                   absent: the time of the write.
 *
 * An empty value unsets a key.  Empty lines are ignored.  A line without
 * '=', an empty key or a repeated key is -EINVAL.  Readers ignore keys they
 * do not know (a newer daemon may add some); writers may not use them.
 */
#ifndef VFHEALTH_GRAMMAR_ASSIGNMENT_H
#define VFHEALTH_GRAMMAR_ASSIGNMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "grammar/limits.h"

enum assignment_key {
	ASSIGNMENT_CLAIMED_AT,
	ASSIGNMENT_AGENT,
	ASSIGNMENT_CONTROL,
	ASSIGNMENT_PID,
	ASSIGNMENT_PID_STARTTIME,
	ASSIGNMENT_BOOT_ID,
	ASSIGNMENT_KEY_COUNT, /* the keys of the file, above */
	/* command keys, after the file's: never rendered, never in a file */
	ASSIGNMENT_RELEASE = ASSIGNMENT_KEY_COUNT,
	ASSIGNMENT_ENDED,
	ASSIGNMENT_DIED_AT,
	ASSIGNMENT_COMMAND_END
};

/* "claimed_at", ..., "boot_id", "release", "ended", "died_at"; NULL for
 * others. */
const char *assignment_key_name(enum assignment_key key);

/* Which claim a record speaks of: the three fields that name one claim
 * wherever a check of it is passed on (sentinel/counters.h, fs/metrics.h). */
struct claim_ref {
	char vf[VF_ADDR_BUFSZ];
	char instance_id[INSTANCE_ID_MAX + 1];
	char claimed_at[RFC3339_BUFSZ];
};

struct assignment {
	char vf[VF_ADDR_BUFSZ];                /* from the path */
	char instance_id[INSTANCE_ID_MAX + 1]; /* from the path */
	char claimed_at[RFC3339_BUFSZ];        /* canonical, "" when unset */
	char agent[AGENT_ENDPOINT_MAX + 1];    /* "" when unset */
	char control[CONTROL_PATH_MAX + 1];    /* "" when unset */
	int64_t pid;                           /* 0 when unset */
	uint64_t pid_starttime;                /* 0 when unknown */
	char boot_id[BOOT_ID_BUFSZ];           /* "" when unknown */
};

/* Every key in table order, "key=value\n" each (the whole file).  Returns 0
 * or -EIO when out reports an error. */
int assignment_render(const struct assignment *a, FILE *out);

/* Reader: parse the text of <vf>/assignments/<instance_id> (vf and
 * instance_id come from the path and are validated).  claimed_at may be
 * empty; agent= is not checked beyond its length (the sentinel parses the
 * endpoint when it uses it).  -EINVAL for a bad vf/instance, a NUL byte, a
 * bad line or value; -E2BIG when len exceeds ASSIGNMENT_FILE_MAX or a value
 * its limit. */
int assignment_parse(const char *vf, const char *instance_id, const char *text, size_t len,
		     struct assignment *ret);

/* A release command. */
struct assignment_release {
	char claimed_at[RFC3339_BUFSZ]; /* the claim it releases, canonical */
	bool crashed;                   /* ended=crash */
	char died_at[RFC3339_BUFSZ];    /* canonical; "" when not said */
};

/* Writer: whether command (NUL-terminated) is a release command, the line
 * release=CLAIMED_AT with at most ended=crash and died_at=TIME (empty lines
 * aside): 1 with *ret set; 0 when it names none of them (an update: see
 * below); -EINVAL when it names a command key with a key of the file, ended=
 * or died_at= without release=, died_at= without ended=crash, another ended=
 * than crash, or a bad time, or is not key=value lines. */
int assignment_parse_release(const char *command, struct assignment_release *ret);

/* Writer: apply the key=value lines of command (NUL-terminated) to a copy of
 * current and store it in *ret; touches nothing else.  may_set_claimed_at:
 * this is the first write through the handle that created the claim.  On
 * success *keys_written (when non-NULL) has bit (1u << key) set for every
 * key the command named: the caller records pid_starttime when pid was
 * written (ret->pid_starttime is then 0).  -EINVAL for anything a writer may
 * not write (bad values and lengths included, and command keys). */
int assignment_parse_update(const struct assignment *current, const char *command,
			    bool may_set_claimed_at, struct assignment *ret,
			    unsigned *keys_written);

/* Which rule command breaks, as the writer it refuses is told (a static
 * string); NULL when assignment_parse_update() accepts it. */
const char *assignment_update_refusal(const struct assignment *current, const char *command,
				      bool may_set_claimed_at);

/* -- the claims listing ----------------------------------------------------------
 *
 * The top-level file `claims` names every live claim, one "VF INSTANCE\n"
 * line each (the names of <vf>/assignments/<instance>), sorted by VF: a
 * poller reads this one file instead of listing every VF's assignments/
 * directory, which at VFS_MAX VFs is 65,536 directory reads per poll.  At
 * most one line per VF, so at most CLAIMS_FILE_MAX bytes. */
#define CLAIMS_LINE_MAX (VF_ADDR_LEN + 1 + INSTANCE_ID_MAX + 1)
#define CLAIMS_FILE_MAX ((size_t)VFS_MAX * CLAIMS_LINE_MAX)

/* One line, with its newline.  0 or -EIO when out reports an error. */
int claims_line_render(const char *vf, const char *instance_id, FILE *out);

/* One line of len bytes (without its newline) into vf and instance_id.
 * -EINVAL unless it is exactly a valid VF address, one space and a valid
 * instance id. */
int claims_line_parse(const char *line, size_t len, char vf[VF_ADDR_BUFSZ],
		      char instance_id[INSTANCE_ID_MAX + 1]);

#endif
