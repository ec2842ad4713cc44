/* SPDX-License-Identifier: MIT */
/*
 * audit.c - the log lines of writes through the mount: refused (with the
 * rule the write broke) and accepted, each naming who wrote (uid, pid and
 * the process's command).
 */
#include "fs/vffs-internal.h"

#include <stdlib.h>
#include <string.h>

/* A refused write or claim, once, at info: what, who, and which rule it broke. */
void log_refused(fuse_req_t req, const char *what, const char *file, const char *why)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	log_info("%s %s refused (uid %u, pid %d): %s", what, file, (unsigned)ctx->uid,
		 (int)ctx->pid, why);
}

/* A change made through the files (a write, a claim, a release), once, at
 * notice for the operator's files and info for reports and claims: who
 * (uid, pid: the writing thread as FUSE names it) and the command under
 * the message rule (message.h: one line, valid UTF-8). */
static void log_accepted_by(uid_t uid, pid_t pid, int level, const char *what, const char *file,
			    const char *command)
{
	char shown[VFILE_COMMAND_MAX + 1];
	size_t n = message_sanitize_to(command, shown, sizeof(shown));

	log_msg(level, "%s %s accepted (uid %u, pid %d)%s%s", what, file, (unsigned)uid, (int)pid,
		n ? ": " : "", shown);
}

void log_accepted(fuse_req_t req, int level, const char *what, const char *file,
		  const char *command)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	log_accepted_by(ctx->uid, ctx->pid, level, what, file, command);
}
