/* SPDX-License-Identifier: MIT */
/* options.c - the sentinel's command-line options (options.h). */
#include "sentinel/options.h"

#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "common/parse.h"

_Static_assert(SOCKDIRS_MAX == 16, "SENTINEL_OPTIONS_HELP says 16");

void sentinel_options_init(struct sentinel_options *o)
{
	*o = (struct sentinel_options){
		.enabled = true,
		.poll = true,
		.poll_interval_ns = SENTINEL_DEFAULT_POLL_INTERVAL_NS,
		.poll_timeout_ns = SENTINEL_DEFAULT_POLL_TIMEOUT_NS,
		.concurrency = SENTINEL_DEFAULT_CONCURRENCY,
		.reconcile = true,
		.reconcile_interval_ns = SENTINEL_DEFAULT_RECONCILE_INTERVAL_NS,
		.agent_grace_ns = SENTINEL_DEFAULT_AGENT_GRACE_NS,
		.control_grace_ns = SENTINEL_DEFAULT_CONTROL_GRACE_NS,
		.proc_root = "/proc",
	};
	sockdirs_init_default(&o->socket_dirs);
}

static int apply_seconds(const char *name, const char *arg, int64_t *ret)
{
	int r = parse_seconds(arg, SENTINEL_DURATION_MAX_NS, ret);
	if (r < 0)
		log_err("--%s: \"%s\" is not a duration in seconds (> 0, at most 86400; "
			"fractions such as 0.2 are fine)",
			name, arg);
	return r;
}

int sentinel_options_apply(struct sentinel_options *o, int opt, const char *arg)
{
	uint64_t n;
	int r;

	switch (opt) {
	case SENTINEL_OPT_NO_SENTINEL:
		o->enabled = false;
		return 0;
	case SENTINEL_OPT_POLL_INTERVAL:
		return apply_seconds("poll-interval", arg, &o->poll_interval_ns);
	case SENTINEL_OPT_POLL_TIMEOUT:
		return apply_seconds("poll-timeout", arg, &o->poll_timeout_ns);
	case SENTINEL_OPT_RECONCILE_INTERVAL:
		return apply_seconds("reconcile-interval", arg, &o->reconcile_interval_ns);
	case SENTINEL_OPT_AGENT_GRACE:
		return apply_seconds("agent-grace", arg, &o->agent_grace_ns);
	case SENTINEL_OPT_CONTROL_GRACE:
		if (arg && strcmp(arg, "0") == 0) {
			o->control_grace_ns = 0;
			return 0;
		}
		r = parse_seconds(arg, SENTINEL_DURATION_MAX_NS, &o->control_grace_ns);
		if (r < 0)
			log_err("--control-grace: \"%s\" is not 0 or a duration in seconds (at most "
				"86400; fractions such as 0.2 are fine)",
				arg ? arg : "");
		return r;
	case SENTINEL_OPT_CONCURRENCY:
		r = parse_uint64(arg, SENTINEL_CONCURRENCY_MIN, SENTINEL_CONCURRENCY_MAX, &n);
		if (r < 0) {
			log_err("--concurrency: \"%s\" is not an integer in %d..%d", arg,
				SENTINEL_CONCURRENCY_MIN, SENTINEL_CONCURRENCY_MAX);
			return r;
		}
		o->concurrency = (unsigned)n;
		return 0;
	case SENTINEL_OPT_NO_RECONCILE:
		o->reconcile = false;
		return 0;
	case SENTINEL_OPT_PROC_ROOT:
		if (!arg || arg[0] != '/') {
			log_err("--proc-root: \"%s\" is not an absolute path", arg ? arg : "");
			return -EINVAL;
		}
		o->proc_root = arg;
		return 0;
	case SENTINEL_OPT_SOCKET_DIR: {
		struct sockdirs dirs = o->socket_dirs;

		if (!o->socket_dirs_given)
			dirs.count = 0; /* the first one replaces the defaults */
		r = sockdirs_add(&dirs, arg ? arg : "");
		if (r == -E2BIG)
			log_err("--socket-dir: at most %d directories", SOCKDIRS_MAX);
		else if (r < 0)
			log_err("--socket-dir: \"%s\" is not an absolute, normalized directory "
				"other than / (at most %zu bytes)",
				arg ? arg : "", SOCKDIR_PATH_MAX);
		if (r < 0)
			return r == -EINVAL ? r : -ERANGE;
		o->socket_dirs = dirs;
		o->socket_dirs_given = true;
		return 0;
	}
	}
	return -ENOENT;
}
