/* SPDX-License-Identifier: MIT */
/* main.c - vfhealth-agent: options in, server.c or a one-shot query out. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guest-agent/server.h"
#include "proto/client.h"
#include "common/log.h"
#include "common/parse.h"

#define SECONDS_MAX_NS (86400 * NSEC_PER_SEC)
#define QUERY_DEFAULT_TIMEOUT_NS (5 * NSEC_PER_SEC)

/* --query exit statuses (a bad command line with --query is QUERY_ERROR:
 * 2 already means "unknown" there) */
enum {
	QUERY_OK = 0,
	QUERY_FAILED = 1,
	QUERY_UNKNOWN = 2,
	QUERY_ERROR = 3
};
/* as an agent: 1 when it cannot run, 2 for a bad command line */
enum {
	EXIT_USAGE = 2
};

enum {
	OPT_KMSG = 256,
	OPT_SYSFS_ROOT,
	OPT_NVIDIA_SMI,
	OPT_PROBE_INTERVAL,
	OPT_PROBE_WINDOW,
	OPT_PROBE_TIMEOUT,
	OPT_PROBE_BACKOFF_MAX,
	OPT_DEV_DIR,
	OPT_NO_DEVICE_PROBE,
	OPT_RULES,
	OPT_CLIENT_TIMEOUT,
	OPT_QUERY,
	OPT_TIMEOUT,
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: vfhealth-agent [OPTIONS]\n"
		"       vfhealth-agent --query ENDPOINT [--timeout S]\n"
		"\n"
		"Answer the host's GetGPUInitStatus: unknown (with a reason), failed (the\n"
		"kernel logged a line a failure rule matches, built in: \"NVRM: ...\n"
		"RmInitAdapter failed!\") or ok (a probe opened the GPU's device nodes, or\n"
		"nvidia-smi -L succeeded).\n"
		"Runs in the foreground; logs to stderr.\n"
		"\n"
		"  -l, --listen EP          vsock:any[:PORT], vsock:CID[:PORT] or unix:PATH\n"
		"                           (default " AGENT_DEFAULT_LISTEN ")\n"
		"      --kmsg PATH          kernel log (default " AGENT_DEFAULT_KMSG
		"; a FIFO or file\n"
		"                           is read as lines)\n"
		"      --sysfs-root DIR     where to look for NVIDIA PCI devices (default /sys)\n"
		"      --nvidia-smi PATH    probe with it (default: nvidia-smi on $PATH)\n"
		"      --dev-dir DIR        probe by opening DIR/nvidiactl and DIR/nvidiaN\n"
		"                           (default " AGENT_DEFAULT_DEV_DIR ")\n"
		"      --no-device-probe    do not open device nodes (nvidia-smi only)\n"
		"      --probe-interval S   between probe attempts (default 15)\n"
		"      --probe-window S     attempts every interval for this long (default 600)\n"
		"      --probe-backoff-max S  then back off (doubling) up to S between\n"
		"                           attempts (default 300; 0: stop at the window)\n"
		"      --probe-timeout S    kill an attempt after this long (default 30)\n"
		"      --rules FILE         more kernel-log rules: 'failure TEXT' or\n"
		"                           'ignore TEXT' per line (vfhealth-agent(8))\n"
		"      --client-timeout S   per-connection deadline (default 5)\n"
		"  -f, --foreground         accepted for compatibility; always foreground\n"
		"  -v, --verbose            debug logging (every kernel record judged)\n"
		"      --query EP           ask the agent at EP (vsock:CID[:PORT],\n"
		"                           hvsock:PATH[:PORT], unix:PATH); print the state,\n"
		"                           then the message and 'rule: TEXT' (failed) or\n"
		"                           'reason: WHY' (unknown); exit 0 ok, 1 failed, 2 unknown,\n"
		"                           3 error or unsupported\n"
		"      --timeout S          deadline of --query (default 5)\n"
		"  -h, --help               this text\n"
		"  -V, --version            the version\n"
		"Seconds accept fractions (0.2).\n");
}

static int seconds_option(const char *name, const char *value, int64_t *ret)
{
	int k = parse_seconds(value, SECONDS_MAX_NS, ret);

	if (k < 0)
		fprintf(stderr, "vfhealth-agent: --%s '%s': expected seconds > 0 and <= 86400\n",
			name, value);
	return k;
}

static int run_query(const char *target, int64_t timeout_ns)
{
	struct endpoint ep;
	struct agent_status st;
	int k = endpoint_parse(target, &ep);

	if (k < 0) {
		fprintf(stderr, "vfhealth-agent: --query '%s': not an endpoint\n", target);
		return QUERY_ERROR;
	}
	k = agent_query(&ep, timeout_ns, -1, &st);
	if (k == -EOPNOTSUPP) {
		fprintf(stderr,
			"vfhealth-agent: %s: the agent does not implement GetGPUInitStatus\n",
			target);
		return QUERY_ERROR;
	}
	if (k < 0) {
		fprintf(stderr, "vfhealth-agent: %s: %s\n", target, strerror(-k));
		return QUERY_ERROR;
	}
	printf("%s\n", gpu_init_state_name(st.state));
	if (st.message[0])
		printf("%s\n", st.message);
	if (st.state == GPU_INIT_FAILED && st.rule[0])
		printf("rule: %s\n", st.rule);
	/* An older agent sends no reason: print none rather than guess. */
	if (st.state == GPU_INIT_UNKNOWN && st.reason != AGENT_REASON_UNSPECIFIED)
		printf("reason: %s\n", agent_unknown_reason_name(st.reason));
	fflush(stdout);
	switch (st.state) {
	case GPU_INIT_OK:
		return QUERY_OK;
	case GPU_INIT_FAILED:
		return QUERY_FAILED;
	default:
		return QUERY_UNKNOWN;
	}
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "kmsg", required_argument, NULL, OPT_KMSG },
		{ "sysfs-root", required_argument, NULL, OPT_SYSFS_ROOT },
		{ "nvidia-smi", required_argument, NULL, OPT_NVIDIA_SMI },
		{ "probe-interval", required_argument, NULL, OPT_PROBE_INTERVAL },
		{ "probe-window", required_argument, NULL, OPT_PROBE_WINDOW },
		{ "probe-timeout", required_argument, NULL, OPT_PROBE_TIMEOUT },
		{ "probe-backoff-max", required_argument, NULL, OPT_PROBE_BACKOFF_MAX },
		{ "dev-dir", required_argument, NULL, OPT_DEV_DIR },
		{ "no-device-probe", no_argument, NULL, OPT_NO_DEVICE_PROBE },
		{ "rules", required_argument, NULL, OPT_RULES },
		{ "client-timeout", required_argument, NULL, OPT_CLIENT_TIMEOUT },
		{ "foreground", no_argument, NULL, 'f' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "query", required_argument, NULL, OPT_QUERY },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	struct agent_options o;
	const char *query = NULL;
	int64_t query_timeout_ns = QUERY_DEFAULT_TIMEOUT_NS;
	bool timeout_given = false, agent_option_given = false, bad_command_line = false;
	int c, k;

	agent_options_init(&o);
	log_set_ident("vfhealth-agent");
	while ((c = getopt_long(argc, argv, "l:fvhV", options, NULL)) != -1) {
		if (c != OPT_QUERY && c != OPT_TIMEOUT && c != 'v' && c != 'h' && c != 'V')
			agent_option_given = true;
		switch (c) {
		case 'l':
			if (endpoint_parse_listen(optarg, &o.listen) < 0) {
				fprintf(stderr,
					"vfhealth-agent: --listen '%s': expected vsock:any[:PORT], "
					"vsock:CID[:PORT] or unix:/PATH\n",
					optarg);
				bad_command_line = true;
			}
			break;
		case OPT_KMSG:
			o.kmsg_path = optarg;
			break;
		case OPT_SYSFS_ROOT:
			o.sysfs_root = optarg;
			break;
		case OPT_NVIDIA_SMI:
			o.nvidia_smi = optarg;
			break;
		case OPT_PROBE_INTERVAL:
			if (seconds_option("probe-interval", optarg, &o.probe_interval_ns) < 0)
				bad_command_line = true;
			break;
		case OPT_PROBE_WINDOW:
			if (seconds_option("probe-window", optarg, &o.probe_window_ns) < 0)
				bad_command_line = true;
			break;
		case OPT_PROBE_TIMEOUT:
			if (seconds_option("probe-timeout", optarg, &o.probe_timeout_ns) < 0)
				bad_command_line = true;
			break;
		case OPT_PROBE_BACKOFF_MAX:
			/* 0 is allowed here: the old behaviour, stop at the window */
			if (strcmp(optarg, "0") == 0)
				o.probe_backoff_max_ns = 0;
			else if (seconds_option("probe-backoff-max", optarg,
						&o.probe_backoff_max_ns) < 0)
				return EXIT_FAILURE;
			break;
		case OPT_DEV_DIR:
			if (!*optarg) {
				fprintf(stderr, "vfhealth-agent: --dev-dir: empty\n");
				return EXIT_FAILURE;
			}
			o.dev_dir = optarg;
			break;
		case OPT_NO_DEVICE_PROBE:
			o.dev_dir = NULL;
			break;
		case OPT_RULES:
			o.rules_path = optarg;
			break;
		case OPT_CLIENT_TIMEOUT:
			if (seconds_option("client-timeout", optarg, &o.client_timeout_ns) < 0)
				bad_command_line = true;
			break;
		case 'f':
			break; /* always in the foreground */
		case 'v':
			log_set_max_priority(LOG_DEBUG);
			break;
		case OPT_QUERY:
			query = optarg;
			break;
		case OPT_TIMEOUT:
			if (seconds_option("timeout", optarg, &query_timeout_ns) < 0)
				bad_command_line = true;
			timeout_given = true;
			break;
		case 'h':
			if (bad_command_line)
				break; /* the error's status, not help's */
			usage(stdout);
			return EXIT_SUCCESS;
		case 'V':
			if (bad_command_line)
				break;
			printf("vfhealth-agent %s\n", VFHEALTH_VERSION);
			return EXIT_SUCCESS;
		default:
			bad_command_line = true; /* getopt_long said why */
			break;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "vfhealth-agent: unexpected argument '%s'\n", argv[optind]);
		bad_command_line = true;
	}
	if (bad_command_line) /* the whole line read: with --query, its status */
		return query ? QUERY_ERROR : EXIT_USAGE;
	if (query) {
		if (agent_option_given) {
			fprintf(stderr, "vfhealth-agent: --query takes only --timeout\n");
			return QUERY_ERROR;
		}
		return run_query(query, query_timeout_ns);
	}
	if (timeout_given) {
		fprintf(stderr, "vfhealth-agent: --timeout belongs to --query\n");
		return EXIT_USAGE;
	}

	k = agent_run(&o);
	return k < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
