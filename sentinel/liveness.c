/* SPDX-License-Identifier: MIT */
/* liveness.c - the evidence about a claim's VMM, read from /proc
 * (liveness.h). */
#include "sentinel/liveness.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/cleanup.h"
#include "proto/procfs.h"

bool unix_line_listens_on(const char *line, size_t len, const char *path)
{
	char head[128];
	unsigned long flags;
	unsigned state;
	size_t path_len = strlen(path);
	int end = -1;

	/* The fixed columns are short; the path is the rest of the line. */
	if (len == 0 || len < path_len + 1)
		return false;
	memcpy(head, line, MIN(len, sizeof(head) - 1));
	head[MIN(len, sizeof(head) - 1)] = '\0';
	if (sscanf(head, "%*[0-9a-fA-F]: %*x %*x %lx %*x %x %*u%n", &flags, &state, &end) != 2 ||
	    end < 0)
		return false;
	if (!(flags & UNIX_FLAG_ACCEPTCON) || state != UNIX_STATE_UNCONNECTED)
		return false;
	/* " PATH" ends the line; an unbound socket has nothing after the inode. */
	return (size_t)end + 1 + path_len == len && line[end] == ' ' &&
	       memcmp(line + end + 1, path, path_len) == 0;
}

int unix_socket_listening(const char *proc_root, int64_t pid, const char *path)
{
	char file[PATH_MAX];
	_cleanup_fclose_ FILE *f = NULL;
	_cleanup_free_ char *line = NULL;
	size_t size = 0;
	ssize_t n;
	int r;

	if (pid > 0)
		r = snprintf(file, sizeof(file), "%s/%" PRId64 "/net/unix", proc_root, pid);
	else
		r = snprintf(file, sizeof(file), "%s/self/net/unix", proc_root);
	if (r < 0 || (size_t)r >= sizeof(file))
		return -ENAMETOOLONG;
	f = fopen(file, "re");
	if (!f)
		return errno == ESRCH ? -ENOENT : negative_errno();
	errno = 0;
	while ((n = getline(&line, &size, f)) >= 0) {
		size_t len = (size_t)n;

		if (len > 0 && line[len - 1] == '\n')
			len--;
		if (unix_line_listens_on(line, len, path))
			return 1;
		errno = 0;
	}
	if (ferror(f) || errno)
		return errno ? (errno == ESRCH ? -ENOENT : negative_errno()) : -EIO;
	return 0;
}

void liveness_gather(const char *proc_root, const struct assignment *c, int boot_rc,
		     const char *boot_id_now, struct liveness_evidence *ev)
{
	*ev = (struct liveness_evidence){
		.pid = c->pid,
		.starttime_claimed = c->pid_starttime,
		.boot_id_given = c->boot_id[0] != '\0',
		.control_given = c->control[0] != '\0',
	};
	if (ev->boot_id_given) {
		ev->boot_rc = boot_rc;
		ev->boot_id_same = boot_rc == 0 && strcmp(boot_id_now, c->boot_id) == 0;
	}
	if (ev->pid > 0)
		ev->proc_rc = proc_pid_starttime(proc_root, ev->pid, &ev->starttime_now);
	if (!ev->control_given)
		return;
	if (ev->pid > 0 && (ev->proc_rc < 0 || (ev->starttime_claimed != 0 &&
						 ev->starttime_now != ev->starttime_claimed))) {
		/* Not this VMM's namespace (gone, unreadable or another
		 * process): the pid alone decides. */
		ev->sockets_rc = ev->proc_rc < 0 ? ev->proc_rc : -ESRCH;
		return;
	}
	int r = unix_socket_listening(proc_root, ev->pid, c->control);
	if (r < 0)
		ev->sockets_rc = r;
	else
		ev->listening = r == 1;
}
