/* SPDX-License-Identifier: MIT */
/*
 * vfhealthd - mount the vfhealth file interface (vfhealthd(8), vfhealth(5)).
 *
 * The composition root, and nothing else: it parses the options, mounts
 * (libvffs), opens the store (libvfstore) and hands it to the filesystem,
 * subscribes the filesystem's notifier, the recovery thread and the
 * service manager's status to the store's changes (store_subscribe), and
 * runs the sentinel program as a child (sentinel-process.h), whose
 * counters it registers with the `metrics` file (fs/metrics.h).  Every rule
 * lives in those libraries; this file only wires them and orders their life
 * cycles (docs/architecture.md, "Processes, threads and locks").
 *
 * Design notes
 * ------------
 * Exit status: 0 after SIGTERM/SIGINT, 2 for bad usage, 1 for every
 * failure, so that Restart=on-failure restarts it: a live vfhealth mount at
 * the mountpoint (vffs_mount refuses to stack a mount over it), a store held
 * by another process, the mount unmounted from outside, the sentinel's
 * death.  $NOTIFY_SOCKET hears READY=1 with the store's STATUS= and every
 * availability change after it (sd-notify.h).  SIGHUP is logged and
 * otherwise ignored: nothing is read after the start (options come from the
 * command line), and a HUP that stopped the daemon with status 0 would stop
 * it for good under Restart=on-failure.
 *
 * Threads: this main thread does all of the above, then only waits for
 * SIGTERM/SIGINT/SIGHUP (and SIGCHLD from the sentinel) with sigwait();
 * those are blocked before any thread exists, so no other thread ever takes
 * them.  libvffs runs the FUSE loop, its workers and the notifier on threads
 * of its own.  The sentinel is spawned from this thread (its parent-death
 * signal follows the thread that forked it) before vffs_start().
 * Locks: none here.
 * Shutdown: clients of the mount (the sentinel) stop first, while the mount
 * still serves, then vffs_stop() stops the notifier, leaves the FUSE loop
 * and unmounts, then the subscribers leave and the store closes; see the
 * marked places below.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fuse_lowlevel.h>
#include <systemd/sd-journal.h>

#include "daemon/sd-notify.h"
#include "daemon/sentinel-process.h"
#include "fs/metrics.h"
#include "recovery/recovery.h"
#include "store/store.h"
#include "fs/vffs.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/path.h"
#include "common/parse.h"
#include "sentinel/options.h"

#define FUSE_OPTIONS_MAX 4096
#define DEFAULT_DB "/var/lib/vfhealth/vfhealth.db"
/* How long a stopping sentinel may take beyond one poll timeout before it
 * is killed (it stops within one poll timeout, vfhealth-sentinel(8)). */
#define SENTINEL_STOP_GRACE_NS (2 * NSEC_PER_SEC)

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: vfhealthd [OPTIONS] [MOUNTPOINT]\n"
		"Mount the vfhealth file interface (default %s).\n\n"
		"  --db PATH         the health database (default %s)\n"
		"  --threshold N     failed assignments that quarantine a VF, %d..%d\n"
		"                    (default: keep the stored value, %d on a new database)\n"
		"  --init-window S   a VMM dead within S seconds of its claim makes the VF\n"
		"                    suspect, at most %d, 0 off (default %d)\n"
		"  --group NAME      group that may write the files (default root)\n"
		"  --sysfs-root DIR  where sysfs is, for VFs' parent GPUs (default /sys)\n"
		"  --register HOW    sysfs: register every VF of every NVIDIA GPU sysfs\n"
		"                    shows, at start and whenever they change; manual:\n"
		"                    only what is registered by hand, mkdir (default sysfs)\n"
		"  --recover-program PATH  what runs a drained GPU's SR-IOV cycle\n"
		"                    (gpus/PF/recover, auto_recover); default: none, no\n"
		"                    cycle is ever run\n"
		"  --recover-timeout S  its deadline, up to %d (default %d)\n"
		"  --auto-drain-timeout S  end a drain auto_recover began whose cycle has\n"
		"                    not begun within S seconds, up to %d, 0 never\n"
		"                    (default %d)\n"
		"  -f, --foreground  do not daemonize (use under systemd, Type=notify)\n"
		"  -o OPT[,OPT...]   extra FUSE mount options\n"
		"  --fuse-workers N  FUSE worker threads at most, 1..%d (default %d)\n"
		"  --log-target TARGET  auto (the journal when stderr is the journal,\n"
		"                    else stderr), journal or stderr (default auto)\n"
		"  -d, --debug       log debug messages and trace FUSE requests\n"
		"  -h, --help        show this help\n"
		"  -V, --version     show the version\n",
		VFFS_DEFAULT_MOUNTPOINT, DEFAULT_DB, THRESHOLD_MIN, THRESHOLD_MAX,
		THRESHOLD_DEFAULT, INIT_WINDOW_MAX_S, INIT_WINDOW_DEFAULT_S, RECOVERY_TIMEOUT_MAX_S,
		RECOVERY_TIMEOUT_DEFAULT_S, AUTO_DRAIN_TIMEOUT_MAX_S, AUTO_DRAIN_TIMEOUT_DEFAULT_S,
		VFFS_MAX_WORKERS_MAX, VFFS_MAX_WORKERS_DEFAULT);
	fprintf(out, "\n%s%s", SENTINEL_OPTIONS_HELP, SENTINEL_NO_SENTINEL_HELP);
	fprintf(out,
		"      --sentinel-program PATH  the vfhealth-sentinel to run (default: the one\n"
		"                               beside vfhealthd, else in %s)\n",
		VFHEALTH_SBINDIR);
}

static int lookup_group(const char *name, gid_t *ret)
{
	struct group *gr;

	errno = 0;
	gr = getgrnam(name);
	if (!gr)
		return errno ? negative_errno() : -ENOENT;
	*ret = gr->gr_gid;
	return 0;
}

/* The argument that passes sentinel option c (with optarg) on to the
 * sentinel program, as its command line spells it.  NULL: out of memory. */
static char *sentinel_arg(const struct option *options, int c, const char *arg)
{
	char *ret = NULL;

	for (const struct option *o = options; o->name; o++) {
		if (o->val != c)
			continue;
		if (o->has_arg == no_argument)
			return asprintf(&ret, "--%s", o->name) < 0 ? NULL : ret;
		return asprintf(&ret, "--%s=%s", o->name, arg) < 0 ? NULL : ret;
	}
	return NULL;
}

static void free_strv(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

static void free_strvp(char ***v)
{
	free_strv(*v);
}

/* Open the store and say, once, whether it serves. */
static int open_store(const char *path, int threshold, int64_t init_window_ns, struct store **ret)
{
	struct store_options so = { .path = path,
				    .threshold = threshold,
				    .max_quarantined = -1,
				    .init_window_ns = init_window_ns };
	char reason[STORE_REASON_MAX];
	int r;

	r = store_open(&so, ret);
	if (r < 0) {
		log_err("cannot open the store %s: %s", path, strerror(-r));
		return r;
	}
	if (!store_status(*ret, reason, sizeof(reason)))
		log_warn("store %s unavailable: %s; placement fails closed until repaired", path,
			 reason);
	return 0;
}

int main(int argc, char **argv)
{
	enum {
		OPT_DB = 256,
		OPT_THRESHOLD,
		OPT_GROUP,
		OPT_SENTINEL_PROGRAM,
		OPT_SYSFS_ROOT,
		OPT_FUSE_WORKERS,
		OPT_LOG_TARGET,
		OPT_INIT_WINDOW,
		OPT_RECOVER_PROGRAM,
		OPT_RECOVER_TIMEOUT,
		OPT_AUTO_DRAIN_TIMEOUT,
		OPT_REGISTER,
	};
	static const struct option long_options[] = {
		{ "db", required_argument, NULL, OPT_DB },
		{ "threshold", required_argument, NULL, OPT_THRESHOLD },
		{ "init-window", required_argument, NULL, OPT_INIT_WINDOW },
		{ "group", required_argument, NULL, OPT_GROUP },
		{ "sysfs-root", required_argument, NULL, OPT_SYSFS_ROOT },
		{ "fuse-workers", required_argument, NULL, OPT_FUSE_WORKERS },
		{ "log-target", required_argument, NULL, OPT_LOG_TARGET },
		{ "sentinel-program", required_argument, NULL, OPT_SENTINEL_PROGRAM },
		{ "recover-program", required_argument, NULL, OPT_RECOVER_PROGRAM },
		{ "recover-timeout", required_argument, NULL, OPT_RECOVER_TIMEOUT },
		{ "auto-drain-timeout", required_argument, NULL, OPT_AUTO_DRAIN_TIMEOUT },
		{ "register", required_argument, NULL, OPT_REGISTER },
		{ "foreground", no_argument, NULL, 'f' },
		{ "debug", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		SENTINEL_GETOPT_OPTIONS,
		SENTINEL_NO_SENTINEL_OPTION,
		{ NULL, 0, NULL, 0 },
	};
	struct vffs_options opt = { .group = 0 };
	struct vffs *fs = NULL;
	struct store *store = NULL;
	struct metrics *metrics = NULL;
	struct sentinel_options sentinel_opt;
	struct sentinel_process *sentinel = NULL;
	struct sd_notifier *notifier = NULL;
	struct recovery_options recovery_opt = { .register_sysfs = true };
	/* freed last, after the mount that rendered its counters */
	__attribute__((cleanup(recovery_freep))) struct recovery *recovery = NULL;
	_cleanup_free_ char *db_path = NULL, *sentinel_program = NULL, *cycle_record = NULL;
	const char *db_arg = DEFAULT_DB, *sentinel_program_arg = NULL;
	/* The sentinel's options, passed on to its program; at most one per argument. */
	__attribute__((cleanup(free_strvp))) char **sentinel_args = calloc((size_t)argc + 3,
									   sizeof(char *));
	size_t n_sentinel_args = 0;
	bool run_sentinel;
	char fuse_options[FUSE_OPTIONS_MAX] = "";
	bool foreground = false;
	sigset_t shutdown_signals;
	uint64_t threshold;
	int64_t init_window_ns = (int64_t)INIT_WINDOW_DEFAULT_S * NSEC_PER_SEC;
	int store_threshold = 0;
	int c, sig = 0, r;

	log_set_ident("vfhealthd");
	log_set_journal_sender(sd_journal_sendv);
	log_set_target(LOG_TARGET_AUTO);
	if (!sentinel_args) {
		log_err("out of memory");
		return 1;
	}
	sentinel_options_init(&sentinel_opt);
	while ((c = getopt_long(argc, argv, "fo:dhV", long_options, NULL)) != -1) {
		switch (c) {
		case OPT_DB:
			db_arg = optarg;
			break;
		case OPT_THRESHOLD:
			if (parse_uint64(optarg, THRESHOLD_MIN, THRESHOLD_MAX, &threshold) < 0) {
				log_err("--threshold must be an integer %d..%d, not '%s'",
					THRESHOLD_MIN, THRESHOLD_MAX, optarg);
				return 2;
			}
			store_threshold = (int)threshold;
			break;
		case OPT_INIT_WINDOW:
			/* 0 turns it off; else seconds, a fraction allowed */
			if (strcmp(optarg, "0") == 0) {
				init_window_ns = 0;
			} else if (parse_seconds(optarg, (int64_t)INIT_WINDOW_MAX_S * NSEC_PER_SEC,
						 &init_window_ns) < 0) {
				log_err("--init-window must be 0 or seconds up to %d, not '%s'",
					INIT_WINDOW_MAX_S, optarg);
				return 2;
			}
			break;
		case OPT_FUSE_WORKERS: {
			uint64_t workers;

			if (parse_uint64(optarg, 1, VFFS_MAX_WORKERS_MAX, &workers) < 0) {
				log_err("--fuse-workers must be an integer 1..%d, not '%s'",
					VFFS_MAX_WORKERS_MAX, optarg);
				return 2;
			}
			opt.max_workers = (unsigned)workers;
			break;
		}
		case OPT_SYSFS_ROOT:
			if (!*optarg) {
				log_err("--sysfs-root needs a directory");
				return 2;
			}
			opt.sysfs_root = optarg;
			break;
		case OPT_GROUP:
			r = lookup_group(optarg, &opt.group);
			if (r < 0) {
				log_err("unknown group '%s'", optarg);
				return 2;
			}
			break;
		case OPT_LOG_TARGET: {
			enum log_target t;
			char *arg;

			if (log_target_parse(optarg, &t) < 0) {
				log_err("--log-target must be auto, journal or stderr, not '%s'",
					optarg);
				return 2;
			}
			log_set_target(t);
			/* the sentinel logs where its parent does */
			if (asprintf(&arg, "--log-target=%s", optarg) < 0) {
				log_err("out of memory");
				return 1;
			}
			sentinel_args[n_sentinel_args++] = arg;
			break;
		}
		case OPT_SENTINEL_PROGRAM:
			sentinel_program_arg = optarg;
			break;
		case OPT_RECOVER_PROGRAM:
			recovery_opt.program = optarg;
			break;
		case OPT_RECOVER_TIMEOUT:
			if (parse_seconds(optarg, (int64_t)RECOVERY_TIMEOUT_MAX_S * NSEC_PER_SEC,
					  &recovery_opt.timeout_ns) < 0 ||
			    recovery_opt.timeout_ns <= 0) {
				log_err("--recover-timeout must be seconds, more than 0 and up to %d,"
					" not '%s'",
					RECOVERY_TIMEOUT_MAX_S, optarg);
				return 2;
			}
			break;
		case OPT_AUTO_DRAIN_TIMEOUT:
			/* 0: never; else seconds, a fraction allowed */
			if (strcmp(optarg, "0") == 0) {
				recovery_opt.auto_drain_timeout_ns = -1;
			} else if (parse_seconds(optarg,
						 (int64_t)AUTO_DRAIN_TIMEOUT_MAX_S * NSEC_PER_SEC,
						 &recovery_opt.auto_drain_timeout_ns) < 0) {
				log_err("--auto-drain-timeout must be 0 or seconds up to %d, not '%s'",
					AUTO_DRAIN_TIMEOUT_MAX_S, optarg);
				return 2;
			}
			break;
		case OPT_REGISTER:
			if (strcmp(optarg, "sysfs") != 0 && strcmp(optarg, "manual") != 0) {
				log_err("--register must be sysfs or manual, not '%s'", optarg);
				return 2;
			}
			recovery_opt.register_sysfs = strcmp(optarg, "sysfs") == 0;
			break;
		case 'f':
			foreground = true;
			break;
		case 'o':
			if (strlen(fuse_options) + strlen(optarg) + 2 > sizeof(fuse_options)) {
				log_err("too many -o options");
				return 2;
			}
			if (fuse_options[0])
				strcat(fuse_options, ",");
			strcat(fuse_options, optarg);
			break;
		case 'd':
			opt.debug = true;
			log_set_max_priority(LOG_DEBUG);
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("vfhealthd %s (libfuse %s)\n", VFHEALTH_VERSION, fuse_pkgversion());
			return 0;
		default:
			if (c >= SENTINEL_OPT_FIRST && c < SENTINEL_OPT_END) {
				/* Checked here, so that a bad value fails at once (exit 2). */
				if (sentinel_options_apply(&sentinel_opt, c, optarg) < 0)
					return 2;
				if (c == SENTINEL_OPT_NO_SENTINEL)
					break;
				sentinel_args[n_sentinel_args] = sentinel_arg(long_options, c,
									      optarg);
				if (!sentinel_args[n_sentinel_args++]) {
					log_err("out of memory");
					return 1;
				}
				break;
			}
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind > 1) {
		log_err("unexpected argument '%s': one MOUNTPOINT at most", argv[optind + 1]);
		return 2;
	}
	/* The sentinel program polls, and releases the claims of dead VMMs:
	 * --no-sentinel stops the one, --no-reconcile the other. */
	run_sentinel = sentinel_opt.enabled || sentinel_opt.reconcile;
	if (run_sentinel) {
		if ((opt.debug && !(sentinel_args[n_sentinel_args++] = strdup("--debug"))) ||
		    (!sentinel_opt.enabled &&
		     !(sentinel_args[n_sentinel_args++] = strdup("--reconcile-only")))) {
			log_err("out of memory");
			return 1;
		}
		if (sentinel_program_find(sentinel_program_arg, &sentinel_program) < 0)
			return sentinel_program_arg ? 2 : 1;
	}
	db_path = path_absolute(db_arg); /* daemonizing changes the working directory */
	if (!db_path || asprintf(&cycle_record, "%s.cycle", db_path) < 0) {
		log_err("out of memory");
		return 1;
	}
	recovery_opt.sysfs_root = opt.sysfs_root;
	/* beside the store: only root writes there.  Before the mount: a
	 * cycle an earlier vfhealthd left running ends first. */
	recovery_opt.record_path = cycle_record;
	r = recovery_new(&recovery_opt, &recovery);
	if (r < 0)
		return r == -ENOMEM ? 1 : 2; /* it said why */
	opt.recovery = recovery;
	if (metrics_new(&metrics) < 0) {
		log_err("out of memory");
		return 1;
	}
	if (sd_notifier_new(&notifier) < 0) {
		log_err("out of memory");
		return 1;
	}
	opt.mountpoint = optind < argc ? argv[optind] : NULL;
	opt.fuse_options = fuse_options[0] ? fuse_options : NULL;
	opt.metrics = metrics;
	opt.socket_dirs = &sentinel_opt.socket_dirs; /* the sentinel gets its --socket-dir too */

	/* Before any thread exists, so that every thread inherits the mask. */
	sigemptyset(&shutdown_signals);
	sigaddset(&shutdown_signals, SIGTERM);
	sigaddset(&shutdown_signals, SIGINT);
	sigaddset(&shutdown_signals, SIGHUP);
	sigaddset(&shutdown_signals, SIGCHLD); /* the sentinel process */
	pthread_sigmask(SIG_BLOCK, &shutdown_signals, NULL);
	signal(SIGPIPE, SIG_IGN);

	r = vffs_new(&opt, &fs);
	if (r == -EINVAL) {
		/* A mount option libfuse refuses is a bad command line (it said which). */
		sd_notifier_free(notifier);
		metrics_free(metrics);
		return 2;
	}
	if (r < 0)
		goto out;
	r = vffs_mount(fs);
	if (r < 0)
		goto out;
	if (!foreground && fuse_daemonize(0) != 0) {
		r = -errno;
		log_err("cannot daemonize");
		goto out;
	}
	r = open_store(db_path, store_threshold, init_window_ns, &store);
	if (r < 0)
		goto out;
	/* A child, not a thread (sentinel-process.h).  Its requests wait in
	 * the kernel until the FUSE loop serves them. */
	if (run_sentinel) {
		r = sentinel_process_spawn(sentinel_program, (const char *const *)sentinel_args,
					   vffs_mountpoint(fs),
					   sentinel_opt.poll_timeout_ns + SENTINEL_STOP_GRACE_NS,
					   &sentinel);
		if (r < 0) {
			log_err("cannot start the sentinel %s: %s", sentinel_program, strerror(-r));
			goto out;
		}
		r = metrics_add_provider(metrics, sentinel_process_render_metrics, sentinel);
		if (r == 0)
			r = metrics_set_check_source(metrics, sentinel_process_last_checks,
						     sentinel);
		if (r < 0) {
			log_err("cannot show the sentinel's counters: %s", strerror(-r));
			goto out;
		}
	}
	r = metrics_add_provider(metrics, recovery_render_metrics, recovery);
	if (r < 0) {
		log_err("cannot show the recovery counters: %s", strerror(-r));
		goto out;
	}
	/* The store tells each of them of its changes itself, before anything
	 * can change it: the filesystem's notifier, the recovery thread, the
	 * service manager's STATUS=. */
	if ((r = store_subscribe(store, vffs_store_changed, fs)) < 0 ||
	    (r = store_subscribe(store, recovery_store_changed, recovery)) < 0 ||
	    (r = store_subscribe(store, sd_notifier_store_changed, notifier)) < 0) {
		log_err("cannot subscribe to the store's changes: %s", strerror(-r));
		goto out;
	}
	r = vffs_start(fs, store);
	if (r < 0)
		goto out;
	/* After the mount serves: a cycle's program may read it. */
	r = recovery_start(recovery, store);
	if (r < 0) {
		log_err("cannot start the recovery thread: %s", strerror(-r));
		goto out;
	}
	r = sd_notifier_ready(notifier, store);
	if (r < 0)
		log_warn("cannot notify readiness to $NOTIFY_SOCKET: %s", strerror(-r));
	r = 0;

	for (;;) {
		if (sigwait(&shutdown_signals, &sig) != 0)
			continue;
		if (vffs_unmounted_outside(fs)) {
			/* Not a request to stop: let Restart=on-failure restart us. */
			log_err("%s was unmounted from outside: exiting with status 1",
				vffs_mountpoint(fs));
			r = -ENOTCONN;
			break;
		}
		if (sig == SIGHUP) {
			log_notice(
				"signal HUP: nothing to reload; new options apply at the next start");
			continue;
		}
		if (sig != SIGCHLD) {
			log_info("signal %s: shutting down",
				 sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
			r = 0;
			break;
		}
		if (sentinel_process_exited(sentinel)) {
			/* Fail loudly rather than serve without detection: let the
			 * service manager restart the daemon (Restart=on-failure). */
			log_err("the sentinel process died: shutting down so that vfhealthd is restarted");
			r = -ECHILD;
			break;
		}
	}

out:
	/* Stop the clients of the mount while it still serves, then unmount,
	 * then close the store the filesystem served. */
	sentinel_process_stop(sentinel);
	recovery_stop(recovery); /* a cycle still running is killed: failed at the next start */
	vffs_stop(fs);
	/* nothing changes the store any more: none of them hears of it again */
	store_unsubscribe(store, sd_notifier_store_changed, notifier);
	store_unsubscribe(store, recovery_store_changed, recovery);
	store_unsubscribe(store, vffs_store_changed, fs);
	store_close(store);
	vffs_free(fs);
	sentinel_process_free(
		sentinel); /* after the mount: `metrics` renders its counters until then */
	metrics_free(metrics);
	sd_notifier_free(notifier); /* after the store: no longer a subscriber */
	return r < 0 ? 1 : 0;
}
