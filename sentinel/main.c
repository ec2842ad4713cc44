/* SPDX-License-Identifier: MIT */
/*
 * vfhealth-sentinel - the sentinel as its own process, against a mount of
 * vfhealthd started with --no-sentinel (or on another host's view of it).
 *
 * vfhealthd runs this same program as its child (daemon/sentinel-process.h),
 * passing its counter table as a shared memfd with --counters-fd (and
 * --reconcile-only under its --no-sentinel); a table of another build's
 * layout is refused (counters.h).
 *
 * DESIGN NOTES
 * Threads: the library's (sentinel.c's design notes); this main thread only waits.
 * Signals: SIGTERM/SIGINT are blocked before the library starts its threads
 * and taken with sigwaitinfo() here, so no handler runs anywhere; then
 * sentinel_stop() (bounded by one poll timeout) and exit 0.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-journal.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/parse.h"
#include "sentinel/sentinel.h"

enum {
	OPT_METRICS_FILE = 0x100,
	OPT_VERSION,
	OPT_COUNTERS_FD,
	OPT_RECONCILE_ONLY,
	OPT_LOG_TARGET,
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: vfhealth-sentinel [OPTIONS] [MOUNTPOINT]\n"
		"Poll the guest agents of the claims under MOUNTPOINT (default /run/vfhealth,\n"
		"a vfhealthd mount) and report their GPU init state to it.\n"
		"\n"
		"  -h, --help                   this text\n"
		"  -V, --version                print the version\n"
		"  -d, --debug                  log debug messages\n"
		"      --log-target TARGET      auto (the journal when stderr is the journal,\n"
		"                               else stderr), journal or stderr (default auto)\n"
		"      --metrics-file PATH      rewrite PATH with the sentinel's metrics after\n"
		"                               every poll (Prometheus text format)\n"
		"      --counters-fd N          (internal, used by vfhealthd) count into the\n"
		"                               shared counter table open as descriptor N\n"
		"      --reconcile-only         poll no agent; only release claims whose VMM is\n"
		"                               dead (what vfhealthd --no-sentinel runs)\n"
		"%s",
		SENTINEL_OPTIONS_HELP);
}

int main(int argc, char **argv)
{
	static const struct option long_options[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ "debug", no_argument, NULL, 'd' },
		{ "metrics-file", required_argument, NULL, OPT_METRICS_FILE },
		{ "counters-fd", required_argument, NULL, OPT_COUNTERS_FD },
		{ "reconcile-only", no_argument, NULL, OPT_RECONCILE_ONLY },
		{ "log-target", required_argument, NULL, OPT_LOG_TARGET },
		SENTINEL_GETOPT_OPTIONS,
		{ 0 },
	};
	struct sentinel_options opt;
	struct sentinel *sentinel = NULL;
	struct sentinel_counters *counters = NULL;
	const char *mountpoint = "/run/vfhealth";
	uint64_t counters_fd;
	sigset_t stop_signals;
	siginfo_t info;
	int c, r;

	enum log_target target;

	log_set_ident("vfhealth-sentinel");
	log_set_journal_sender(sd_journal_sendv);
	log_set_target(LOG_TARGET_AUTO);
	sentinel_options_init(&opt);
	while ((c = getopt_long(argc, argv, "hVd", long_options, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
		case OPT_VERSION:
			printf("vfhealth-sentinel %s\n", VFHEALTH_VERSION);
			return 0;
		case 'd':
			log_set_max_priority(LOG_DEBUG);
			break;
		case OPT_RECONCILE_ONLY:
			opt.poll = false;
			break;
		case OPT_LOG_TARGET:
			if (log_target_parse(optarg, &target) < 0) {
				log_err("--log-target must be auto, journal or stderr, not '%s'",
					optarg);
				return 2;
			}
			log_set_target(target);
			break;
		case OPT_METRICS_FILE:
			opt.metrics_path = optarg;
			break;
		case OPT_COUNTERS_FD:
			if (parse_uint64(optarg, 0, INT_MAX, &counters_fd) < 0 ||
			    (r = sentinel_counters_map((int)counters_fd, &counters)) < 0) {
				fprintf(stderr,
					"vfhealth-sentinel: --counters-fd \"%s\" is not a counter table%s\n",
					optarg, r == -EPROTO ? " of this build's layout" : "");
				return 2;
			}
			break;
		default:
			if (c >= SENTINEL_OPT_FIRST && c < SENTINEL_OPT_END) {
				if (sentinel_options_apply(&opt, c, optarg) < 0)
					return 2;
				break;
			}
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc)
		mountpoint = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, "vfhealth-sentinel: unexpected argument \"%s\"\n", argv[optind]);
		return 2;
	}
	if (!opt.poll && !opt.reconcile) {
		fprintf(stderr,
			"vfhealth-sentinel: --reconcile-only and --no-reconcile leave nothing to do\n");
		return 2;
	}
	if (mountpoint[0] != '/') {
		fprintf(stderr, "vfhealth-sentinel: MOUNTPOINT must be an absolute path\n");
		return 2;
	}

	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGTERM);
	sigaddset(&stop_signals, SIGINT);
	sigprocmask(SIG_BLOCK, &stop_signals, NULL);

	r = counters ? sentinel_start_counting(mountpoint, &opt, counters, &sentinel) :
		       sentinel_start(mountpoint, &opt, &sentinel);
	if (r < 0) {
		log_err("cannot start the sentinel on %s: %s", mountpoint, strerror(-r));
		return 1;
	}
	do
		r = sigwaitinfo(&stop_signals, &info);
	while (r < 0 && errno == EINTR);
	log_info("signal %d: stopping", r > 0 ? r : 0);
	sentinel_free(sentinel);
	sentinel_counters_unmap(counters);
	return 0;
}
