/* SPDX-License-Identifier: MIT */
/*
 * procfs.c - field 22 of /proc/PID/stat and the boot id, read once for the
 * daemon and the sentinel (procfs.h).
 */
#include "common/procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/parse.h"

/* comm is at most 64 bytes (TASK_COMM_LEN on newer kernels): a stat line
 * longer than this is not one we understand. */
#define PROC_STAT_MAX 1024

int proc_stat_parse(const char *text, size_t len, struct proc_stat *ret)
{
	char buf[PROC_STAT_MAX], digits[24];
	const char *close_paren, *p;
	uint64_t v;
	size_t n;
	char state;

	if (len == 0 || len >= sizeof(buf) || memchr(text, '\0', len))
		return -EBADMSG;
	memcpy(buf, text, len);
	buf[len] = '\0';
	close_paren = strrchr(buf, ')');
	if (!close_paren || close_paren[1] != ' ')
		return -EBADMSG;
	/* After ") " comes field 3 (state), one letter; walk to field 22. */
	p = close_paren + 2;
	state = p[0];
	if (state < 'A' || state > 'z' || p[1] != ' ')
		return -EBADMSG;
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EBADMSG;
		p++;
	}
	n = strspn(p, "0123456789");
	if (n == 0 || n >= sizeof(digits) || (p[n] != ' ' && p[n] != '\n' && p[n] != '\0'))
		return -EBADMSG;
	memcpy(digits, p, n);
	digits[n] = '\0';
	if (parse_uint64(digits, 0, UINT64_MAX, &v) < 0)
		return -EBADMSG;
	*ret = (struct proc_stat){ .state = state, .starttime = v };
	return 0;
}

int proc_stat_parse_starttime(const char *text, size_t len, uint64_t *ret)
{
	struct proc_stat st;
	int r = proc_stat_parse(text, len, &st);

	if (r == 0)
		*ret = st.starttime;
	return r;
}

bool proc_state_ended(char state)
{
	return state == 'Z' || state == 'X' || state == 'x';
}

int proc_pid_starttime(const char *proc_root, int64_t pid, uint64_t *ret)
{
	struct proc_stat st;
	int r = proc_pid_stat(proc_root, pid, &st);

	if (r == 0)
		*ret = st.starttime;
	return r;
}

/* Whether a real proc mount hides process pid, which runs: mounted
 * hidepid=invisible,gid=G, it hides other users' processes from a root
 * without CAP_SYS_PTRACE outside group G.  Its absence then says nothing;
 * kill(2) asks the kernel itself.  A test's tree (not a procfs) fakes its
 * processes: its absence is the answer. */
static bool proc_hides(const char *proc_root, int64_t pid)
{
	struct statfs sf;

	if (pid > INT_MAX || statfs(proc_root ? proc_root : "/proc", &sf) < 0 ||
	    sf.f_type != PROC_SUPER_MAGIC)
		return false;
	return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

int proc_pid_stat(const char *proc_root, int64_t pid, struct proc_stat *ret)
{
	char path[PATH_MAX], text[PROC_STAT_MAX];
	_cleanup_close_ int fd = -1;
	ssize_t n;
	int len;

	if (pid <= 0)
		return -EINVAL;
	len = snprintf(path, sizeof(path), "%s/%" PRId64 "/stat", proc_root ? proc_root : "/proc",
		       pid);
	if (len < 0 || (size_t)len >= sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 && errno == ENOENT && proc_hides(proc_root, pid))
		return -EACCES;
	if (fd < 0)
		return errno == ESRCH ? -ENOENT : negative_errno();
	n = read(fd, text, sizeof(text));
	if (n < 0)
		/* The process exited between open and read. */
		return errno == ESRCH ? -ENOENT : negative_errno();
	return proc_stat_parse(text, (size_t)n, ret);
}

bool proc_boot_id_valid(const char *text)
{
	for (size_t i = 0; i < PROC_BOOT_ID_LEN; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		char c = text[i];

		if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;
	}
	return text[PROC_BOOT_ID_LEN] == '\0';
}

int proc_boot_id(const char *proc_root, char ret[static PROC_BOOT_ID_LEN + 1])
{
	_cleanup_close_ int fd = -1;
	char path[PATH_MAX], text[PROC_BOOT_ID_LEN + 2];
	ssize_t n;
	int len;

	len = snprintf(path, sizeof(path), "%s/sys/kernel/random/boot_id",
		       proc_root ? proc_root : "/proc");
	if (len < 0 || (size_t)len >= sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return negative_errno();
	n = read(fd, text, sizeof(text));
	if (n < 0)
		return negative_errno();
	if (n != PROC_BOOT_ID_LEN + 1 || text[PROC_BOOT_ID_LEN] != '\n')
		return -EBADMSG;
	text[PROC_BOOT_ID_LEN] = '\0';
	if (!proc_boot_id_valid(text))
		return -EBADMSG;
	memcpy(ret, text, PROC_BOOT_ID_LEN + 1);
	return 0;
}
