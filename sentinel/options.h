/* SPDX-License-Identifier: MIT */
/*
 * options.h - the sentinel's options, spelled and checked the same way by
 * the two programs that take them: vfhealth-sentinel, and vfhealthd, which
 * checks them and passes them on to the sentinel program it runs
 * (daemon/main.c).  Tests: tests/sentinel/test-verdict.c (the parser).
 */
#ifndef VFHEALTH_SENTINEL_OPTIONS_H
#define VFHEALTH_SENTINEL_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/parse.h"
#include "common/sockdir.h"

#define SENTINEL_DEFAULT_POLL_INTERVAL_NS (5 * NSEC_PER_SEC)
#define SENTINEL_DEFAULT_POLL_TIMEOUT_NS (5 * NSEC_PER_SEC)
#define SENTINEL_DEFAULT_RECONCILE_INTERVAL_NS (60 * NSEC_PER_SEC)
/* The agent's default --probe-window (vfhealth-agent(8)): an agent still
 * answering unknown after it is not going to settle by itself. */
#define SENTINEL_DEFAULT_AGENT_GRACE_NS (600 * NSEC_PER_SEC)
/* Five default reconcile intervals: a VMM that claims its VF before it
 * binds its control socket has that long to bind it. */
#define SENTINEL_DEFAULT_CONTROL_GRACE_NS (300 * NSEC_PER_SEC)
#define SENTINEL_DEFAULT_CONCURRENCY 64
#define SENTINEL_CONCURRENCY_MIN 1
#define SENTINEL_CONCURRENCY_MAX 1024
#define SENTINEL_DURATION_MAX_NS (86400 * NSEC_PER_SEC) /* any duration option: <= 1 day */

struct sentinel_options {
	bool enabled;                  /* vfhealthd: false with --no-sentinel */
	bool poll;                     /* false with vfhealth-sentinel --reconcile-only */
	int64_t poll_interval_ns;      /* --poll-interval S */
	int64_t poll_timeout_ns;       /* --poll-timeout S: each agent query's deadline */
	unsigned concurrency;          /* --concurrency N: queries in flight, 1..1024 */
	bool reconcile;                /* false with --no-reconcile */
	int64_t reconcile_interval_ns; /* --reconcile-interval S */
	int64_t agent_grace_ns;        /* --agent-grace S: rpc_error or unknown for longer
					* is logged (agent-unreachable) */
	int64_t control_grace_ns;      /* --control-grace S: a claim whose control socket
					* was never seen listening is not judged dead by
					* its socket before S after its claim; 0: at once */
	const char *proc_root;         /* where /proc is; tests point it at a fake tree */
	const char *metrics_path;      /* standalone: after every poll and reconcile, replace
					* this file (write + rename) with the metrics; NULL: none */
	/* --socket-dir DIR (repeatable): where the socket paths of claims may
	 * point (common/sockdir.h).  The defaults until the first --socket-dir,
	 * which replaces them.  vfhealthd confines claim writes by the same. */
	struct sockdirs socket_dirs;
	bool socket_dirs_given;
};

/* The defaults above; enabled, poll and reconcile on, proc_root "/proc",
 * the default socket directories. */
void sentinel_options_init(struct sentinel_options *o);

/* getopt_long(3) entries shared by vfhealthd and vfhealth-sentinel: put
 * SENTINEL_GETOPT_OPTIONS inside a struct option array and hand every
 * returned value v with SENTINEL_OPT_FIRST <= v < SENTINEL_OPT_END to
 * sentinel_options_apply().  SENTINEL_OPTIONS_HELP lists exactly them;
 * --no-sentinel is vfhealthd's alone (SENTINEL_NO_SENTINEL_OPTION and its
 * help line), as the sentinel program cannot do without itself. */
enum {
	SENTINEL_OPT_FIRST = 0x5e00,
	SENTINEL_OPT_NO_SENTINEL = SENTINEL_OPT_FIRST,
	SENTINEL_OPT_POLL_INTERVAL,
	SENTINEL_OPT_POLL_TIMEOUT,
	SENTINEL_OPT_CONCURRENCY,
	SENTINEL_OPT_NO_RECONCILE,
	SENTINEL_OPT_RECONCILE_INTERVAL,
	SENTINEL_OPT_PROC_ROOT,
	SENTINEL_OPT_SOCKET_DIR,
	SENTINEL_OPT_AGENT_GRACE,
	SENTINEL_OPT_CONTROL_GRACE,
	SENTINEL_OPT_END,
};

#define SENTINEL_NO_SENTINEL_OPTION                                        \
	{                                                                  \
		"no-sentinel", no_argument, NULL, SENTINEL_OPT_NO_SENTINEL \
	}
#define SENTINEL_NO_SENTINEL_HELP                                                           \
	"      --no-sentinel            do not poll guest agents (stale claims are still\n" \
	"                               released unless --no-reconcile)\n"

#define SENTINEL_GETOPT_OPTIONS                                                         \
	{ "poll-interval", required_argument, NULL, SENTINEL_OPT_POLL_INTERVAL },       \
		{ "poll-timeout", required_argument, NULL, SENTINEL_OPT_POLL_TIMEOUT }, \
		{ "concurrency", required_argument, NULL, SENTINEL_OPT_CONCURRENCY },   \
		{ "no-reconcile", no_argument, NULL, SENTINEL_OPT_NO_RECONCILE },       \
		{ "reconcile-interval", required_argument, NULL,                        \
		  SENTINEL_OPT_RECONCILE_INTERVAL },                                    \
		{ "proc-root", required_argument, NULL, SENTINEL_OPT_PROC_ROOT },       \
		{ "socket-dir", required_argument, NULL, SENTINEL_OPT_SOCKET_DIR },     \
		{ "agent-grace", required_argument, NULL, SENTINEL_OPT_AGENT_GRACE },   \
	{                                                                               \
		"control-grace", required_argument, NULL, SENTINEL_OPT_CONTROL_GRACE    \
	}

#define SENTINEL_OPTIONS_HELP                                                                   \
	"Sentinel (polls guest agents and reports to the store):\n"                             \
	"      --poll-interval S        seconds between polls (default 5; fractions allowed)\n" \
	"      --poll-timeout S         deadline of each agent query (default 5)\n"             \
	"      --concurrency N          agent queries in flight, 1..1024 (default 64)\n"        \
	"      --agent-grace S          log an agent that answers only rpc_error or unknown\n"  \
	"                               for longer (default 600, the agent's probe window)\n"   \
	"      --no-reconcile           never release claims whose VMM is dead\n"               \
	"      --reconcile-interval S   seconds between stale-claim scans (default 60)\n"       \
	"      --control-grace S        a claim's control socket, never seen listening,\n"      \
	"                               may be bound until S after its claim (default\n"        \
	"                               300; 0: judged at once)\n"                              \
	"      --proc-root DIR          where to read PID/stat from (default /proc; tests)\n"   \
	"      --socket-dir DIR         claims' socket paths must lie under DIR, reached\n"     \
	"                               without symlinks (repeatable, up to 16; default:\n"     \
	"                               /run/vfhealth-vmm /run/libvirt/qemu\n"                  \
	"                               /var/lib/libvirt/qemu /run/cloud-hypervisor\n"          \
	"                               /run/firecracker /srv/jailer /run/vc)\n"

/* Apply one option (opt = getopt_long's return value, arg = optarg).  Logs a
 * clear message and returns -EINVAL (bad syntax) or -ERANGE (out of range)
 * on bad input, leaving o unchanged; -ENOENT for an opt that is not ours. */
int sentinel_options_apply(struct sentinel_options *o, int opt, const char *arg);

#endif
