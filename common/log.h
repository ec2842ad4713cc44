/* SPDX-License-Identifier: MIT */
/*
 * log.h - one line per event on stderr, prefixed with the syslog priority
 * ("<3>", "<4>", "<6>", "<7>") so that journald files each line at the right
 * level when a daemon runs under systemd.  Thread-safe: each line is written
 * with a single write(2).
 */
#ifndef VFHEALTH_LOG_H
#define VFHEALTH_LOG_H

#include <syslog.h>

/* Messages above this priority (numerically greater) are dropped.
 * Default LOG_INFO; set from -v / --debug. */
void log_set_max_priority(int prio);
int log_get_max_priority(void);

/* Tag written after the prefix, e.g. "vfhealthd". NULL for none. The string
 * must outlive all logging. */
void log_set_ident(const char *ident);

void log_msg(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_NOTICE, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
