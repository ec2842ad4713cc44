/* SPDX-License-Identifier: MIT */
/* log.c - the one log line format: "<N>ident: message" for journald (log.h). */
#include "common/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

static atomic_int max_priority = LOG_INFO;
static const char *log_ident;

void log_set_max_priority(int prio)
{
	atomic_store(&max_priority, prio);
}

int log_get_max_priority(void)
{
	return atomic_load(&max_priority);
}

void log_set_ident(const char *ident)
{
	log_ident = ident;
}

void log_msg(int prio, const char *fmt, ...)
{
	char line[2048];
	int n, saved_errno = errno;
	va_list ap;

	if (prio > atomic_load(&max_priority))
		return;

	n = snprintf(line, sizeof(line), "<%d>%s%s", prio & 7, log_ident ? log_ident : "",
		     log_ident ? ": " : "");
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	/* One event is one line: fold embedded newlines (a guest's message, say). */
	for (int i = 0; i < n; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* nowhere left to report it */
	}
	errno = saved_errno;
}
