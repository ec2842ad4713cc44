/* SPDX-License-Identifier: MIT */
/*
 * vfhealthd - mount the vfhealth file interface (vfhealthd(8), vfhealth(5)).
 *
 * Design notes
 * ------------
 * Threads: this main thread parses options, mounts, starts libvffs (which
 * runs the FUSE loop, its workers and the notifier on threads of its own)
 * and then only waits for SIGTERM/SIGINT/SIGHUP with sigwait(); those are
 * blocked before any thread exists, so no other thread ever takes them.
 * Locks: none here.
 * Shutdown: clients of the mount (the sentinel) stop first, while the mount
 * still serves, then vffs_stop() stops the notifier, leaves the FUSE loop
 * and unmounts; see the two marked places below.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "store/store.h"
#include "fs/vffs.h"
#include "proto/cleanup.h"
#include "proto/log.h"
#include "proto/parse.h"
#include "sentinel/process.h"

#define FUSE_OPTIONS_MAX 4096

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: vfhealthd [OPTIONS] [MOUNTPOINT]\n"
		"Mount the vfhealth file interface (default %s).\n\n"
		"  --db PATH         the health database (default %s)\n"
		"  --threshold N     failed assignments that quarantine a VF, %d..%d\n"
		"                    (default: keep the stored value, %d on a new database)\n"
		"  --group NAME      group that may write the files (default root)\n"
		"  -f, --foreground  do not daemonize (use under systemd, Type=notify)\n"
		"  -o OPT[,OPT...]   extra FUSE mount options\n"
		"  -d, --debug       log debug messages and trace FUSE requests\n"
		"  -h, --help        show this help\n"
		"  -V, --version     show the version\n",
		VFFS_DEFAULT_MOUNTPOINT, VFFS_DEFAULT_DB, STORE_THRESHOLD_MIN, STORE_THRESHOLD_MAX,
		STORE_THRESHOLD_DEFAULT);
	fprintf(out, "\n%s", SENTINEL_OPTIONS_HELP);
}

/* Tell systemd (Type=notify) we serve, by hand: one datagram to $NOTIFY_SOCKET. */
static int notify_ready(void)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -1;
	char msg[64];
	size_t len;
	int n;

	if (!path || !*path)
		return 0;
	len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, len);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract namespace */
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return negative_errno();
	n = snprintf(msg, sizeof(msg), "READY=1\nMAINPID=%d\n", (int)getpid());
	if (sendto(fd, msg, (size_t)n, MSG_NOSIGNAL, (struct sockaddr *)&sa,
		   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) < 0)
		return negative_errno();
	return 0;
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

int main(int argc, char **argv)
{
	enum { OPT_DB = 256, OPT_THRESHOLD, OPT_GROUP };
	static const struct option long_options[] = {
		{ "db", required_argument, NULL, OPT_DB },
		{ "threshold", required_argument, NULL, OPT_THRESHOLD },
		{ "group", required_argument, NULL, OPT_GROUP },
		{ "foreground", no_argument, NULL, 'f' },
		{ "debug", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		SENTINEL_GETOPT_OPTIONS,
		{ NULL, 0, NULL, 0 },
	};
	struct vffs_options opt = { .group = 0 };
	struct vffs *fs = NULL;
	struct sentinel_options sentinel_opt;
	struct sentinel_process *sentinel = NULL;
	char fuse_options[FUSE_OPTIONS_MAX] = "";
	bool foreground = false;
	sigset_t shutdown_signals;
	uint64_t threshold;
	int c, sig = 0, r;

	log_set_ident("vfhealthd");
	sentinel_options_init(&sentinel_opt);
	while ((c = getopt_long(argc, argv, "fo:dhV", long_options, NULL)) != -1) {
		switch (c) {
		case OPT_DB:
			opt.db_path = optarg;
			break;
		case OPT_THRESHOLD:
			if (parse_uint64(optarg, STORE_THRESHOLD_MIN, STORE_THRESHOLD_MAX, &threshold) < 0) {
				log_err("--threshold must be an integer %d..%d, not '%s'",
					STORE_THRESHOLD_MIN, STORE_THRESHOLD_MAX, optarg);
				return 2;
			}
			opt.threshold = (int)threshold;
			break;
		case OPT_GROUP:
			r = lookup_group(optarg, &opt.group);
			if (r < 0) {
				log_err("unknown group '%s'", optarg);
				return 2;
			}
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
				if (sentinel_options_apply(&sentinel_opt, c, optarg) < 0)
					return 2;
				break;
			}
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind > 1) {
		usage(stderr);
		return 2;
	}
	opt.mountpoint = optind < argc ? argv[optind] : NULL;
	opt.fuse_options = fuse_options[0] ? fuse_options : NULL;

	/* Before any thread exists, so that every thread inherits the mask. */
	sigemptyset(&shutdown_signals);
	sigaddset(&shutdown_signals, SIGTERM);
	sigaddset(&shutdown_signals, SIGINT);
	sigaddset(&shutdown_signals, SIGHUP);
	sigaddset(&shutdown_signals, SIGCHLD); /* the sentinel process */
	pthread_sigmask(SIG_BLOCK, &shutdown_signals, NULL);
	signal(SIGPIPE, SIG_IGN);

	r = vffs_new(&opt, &fs);
	if (r < 0)
		return 1;
	r = vffs_mount(fs);
	if (r < 0)
		goto out;
	if (!foreground && fuse_daemonize(0) != 0) {
		r = -errno;
		log_err("cannot daemonize");
		goto out;
	}
	/* The sentinel is a client of this mount and must not be a thread of
	 * this process (sentinel/process.h says why): fork it now, before
	 * vffs_start() creates any thread.  Its requests wait in the kernel
	 * until the FUSE loop serves them. */
	if (sentinel_opt.enabled) {
		r = sentinel_process_spawn(vffs_mountpoint(fs), &sentinel_opt, &sentinel);
		if (r < 0) {
			log_err("cannot start the sentinel: %s", strerror(-r));
			goto out;
		}
		vffs_add_metrics_provider(fs, sentinel_process_render_metrics, sentinel);
	}
	r = vffs_start(fs);
	if (r < 0)
		goto out;
	r = notify_ready();
	if (r < 0)
		log_warn("cannot notify readiness to $NOTIFY_SOCKET: %s", strerror(-r));

	for (;;) {
		if (sigwait(&shutdown_signals, &sig) != 0)
			continue;
		if (sig != SIGCHLD) {
			log_info("signal %s: shutting down", sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
			r = 0;
			break;
		}
		if (sentinel_process_exited(sentinel)) {
			/* It cannot be forked again once threads exist: let the
			 * service manager restart the daemon (Restart=on-failure). */
			log_err("the sentinel process died: shutting down so that vfhealthd is restarted");
			r = -ECHILD;
			break;
		}
	}

	/* Stop the clients of the mount while it still serves, then unmount. */
	sentinel_process_stop(sentinel);
	vffs_stop(fs);
out:
	vffs_free(fs);
	sentinel_process_free(sentinel); /* after the mount: `metrics` renders its counters until then */
	return r < 0 ? 1 : 0;
}
