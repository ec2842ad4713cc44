/* SPDX-License-Identifier: MIT */
/*
 * test-vmm - a stand-in for a VMM's two sockets, for tests and demos.
 *
 *   --hvsock PATH   hybrid vsock (Cloud Hypervisor / Firecracker style): a
 *                   peer sends "CONNECT <port>\n", we answer "OK <n>\n" and
 *                   then proxy bytes both ways to the guest agent (--agent);
 *   --control PATH  the VMM's control socket: accepts and closes.  A socket
 *                   bound to PATH and listening (the kernel's socket table,
 *                   never the file) is what the sentinel takes as "VMM
 *                   alive"; SIGKILL leaves the file behind, like a real VMM.
 *
 * Misbehaviour for tests: --never-answer (accept, read the CONNECT line, say
 * nothing: a hung guest), --gate FIFO (hold each proxied connection after the
 * handshake until one byte arrives on FIFO), --connect-log FILE (append
 * "CONNECT <port>\n" per handshake, before any gate), --chroot DIR (chroot
 * there first and bind both paths inside it, as Firecracker's jailer does).
 *
 * Two other modes, each alone on the command line, print "ready" once set
 * up and wait for SIGTERM: --forge-abstract PATH listens on an abstract
 * socket whose name is a newline and a forged /proc/net/unix line of a
 * socket listening on PATH (what a local user can do to a text reader of
 * that table); --sockets N holds N Unix sockets (socket pairs), a crowded
 * socket table.
 *
 * DESIGN NOTES
 * Threads: the main thread polls both listening sockets and a signalfd; each
 * accepted hvsock connection gets a detached thread (at most MAX_CONNECTIONS
 * at once; more are closed at once) that does the handshake and the proxying
 * with poll(2).  Locks: conn_lock guards the connection count; gate_lock
 * makes one gate byte release exactly one connection.  Shutdown: SIGTERM or
 * SIGINT (taken by the signalfd; blocked in every thread) unlinks both
 * socket paths and exits 0; the kernel closes every connection.  The
 * control socket is bound at its own path (the socket table names the path
 * it was bound to) and listens before the hvsock socket appears; that one is
 * bound and listening under a temporary name and then renamed into place,
 * so once the hvsock path exists both accept connections.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"

#define MAX_CONNECTIONS 512
#define HANDSHAKE_LINE_MAX 64
#define HANDSHAKE_TIMEOUT_MS 5000
#define PROXY_BUFSZ 65536

static const char *hvsock_path, *control_path, *agent_path, *gate_path, *connect_log_path;
static const char *chroot_dir, *forge_path;
static unsigned long socket_count;
static int never_answer;
static int gate_fd = -1, connect_log_fd = -1;
static pthread_mutex_t conn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned conn_count, conn_serial;

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: test-vmm --hvsock PATH --control PATH (--agent unix:PATH | --never-answer)\n"
		"                [--gate FIFO] [--connect-log FILE] [--chroot DIR]\n"
		"       test-vmm --forge-abstract PATH | --sockets N\n"
		"Serve a VMM's hybrid-vsock socket (CONNECT <port> -> OK <n>, then proxy to the\n"
		"guest agent) and its control socket (accept and close), for tests and demos.\n"
		"\n"
		"  --hvsock PATH        hybrid vsock Unix socket to create\n"
		"  --control PATH       control Unix socket to create\n"
		"  --agent unix:PATH    the guest agent's Unix socket to proxy to\n"
		"  --never-answer       read the CONNECT line and never reply (a hung guest)\n"
		"  --gate FIFO          hold each connection after the handshake until one byte\n"
		"                       can be read from FIFO\n"
		"  --connect-log FILE   append \"CONNECT <port>\" per handshake to FILE\n"
		"  --chroot DIR         chroot to DIR first: the paths are inside it (a jailer)\n"
		"  --forge-abstract PATH  listen on an abstract socket whose name forges a\n"
		"                       /proc/net/unix line of a socket listening on PATH\n"
		"  --sockets N          hold N Unix sockets (a crowded socket table)\n"
		"  -h, --help           this text\n"
		"SIGTERM or SIGINT removes both sockets and exits 0.\n");
}

/* in_place: bind path itself (the socket table shows it); else bind a
 * temporary name, listen, rename into place (the path appears ready). */
static int listen_unix(const char *path, bool in_place)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char tmp[sizeof(sa.sun_path)];
	int fd;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp) ||
	    strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "test-vmm: %s: path too long\n", path);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, in_place ? path : tmp);
	unlink(sa.sun_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return negative_errno();
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 1024) < 0 ||
	    (!in_place && rename(tmp, path) < 0)) {
		int r = negative_errno();
		fprintf(stderr, "test-vmm: %s: %s\n", path, strerror(-r));
		unlink(sa.sun_path);
		close(fd);
		return r;
	}
	return fd;
}

static int connect_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -1;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return negative_errno();
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return negative_errno();
	int connected = fd;
	fd = -1;
	return connected;
}

/* Read "CONNECT <port>\n" one byte at a time (nothing past the newline may
 * be swallowed: it belongs to the agent). */
static int read_handshake(int fd, unsigned *port)
{
	char line[HANDSHAKE_LINE_MAX + 1];
	size_t len = 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, HANDSHAKE_TIMEOUT_MS) <= 0)
			return -ETIMEDOUT;
		n = read(fd, line + len, 1);
		if (n <= 0)
			return n == 0 ? -ECONNRESET : negative_errno();
		if (line[len] == '\n')
			break;
		if (++len >= HANDSHAKE_LINE_MAX)
			return -EPROTO;
	}
	line[len] = '\0';
	if (sscanf(line, "CONNECT %u", port) != 1)
		return -EPROTO;
	return 0;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Copy both ways until both directions are closed. */
static void proxy(int a, int b)
{
	_cleanup_free_ char *buf = malloc(PROXY_BUFSZ);
	bool a_open = true, b_open = true;

	if (!buf)
		return;
	while (a_open || b_open) {
		struct pollfd p[2] = { { .fd = a_open ? a : -1, .events = POLLIN },
				       { .fd = b_open ? b : -1, .events = POLLIN } };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		for (int i = 0; i < 2; i++) {
			int from = i == 0 ? a : b, to = i == 0 ? b : a;
			ssize_t n;

			if (!p[i].revents)
				continue;
			n = read(from, buf, PROXY_BUFSZ);
			if (n <= 0 || write_all(to, buf, (size_t)n) < 0) {
				/* One side is done: pass the EOF on. */
				shutdown(to, SHUT_WR);
				if (i == 0)
					a_open = false;
				else
					b_open = false;
				if (n < 0)
					return;
			}
		}
	}
}

static void log_connect(unsigned port)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "CONNECT %u\n", port);

	if (connect_log_fd >= 0 && write(connect_log_fd, line, (size_t)n) != n)
		fprintf(stderr, "test-vmm: cannot write the connect log: %s\n", strerror(errno));
}

static void wait_gate(void)
{
	char byte;

	pthread_mutex_lock(&gate_lock);
	while (read(gate_fd, &byte, 1) < 0 && errno == EINTR)
		;
	pthread_mutex_unlock(&gate_lock);
}

static void *connection_main(void *userdata)
{
	_cleanup_close_ int fd = (int)(intptr_t)userdata;
	_cleanup_close_ int agent_fd = -1;
	char reply[32];
	unsigned port, serial;
	int r;

	r = read_handshake(fd, &port);
	if (r < 0)
		goto out;
	log_connect(port);
	if (never_answer) {
		/* A hung guest: hold the connection until the peer gives up. */
		char sink[256];
		while (read(fd, sink, sizeof(sink)) > 0)
			;
		goto out;
	}
	/* The gate holds before we reach the agent, so its own per-connection
	 * deadline does not run while we wait. */
	if (gate_fd >= 0)
		wait_gate();
	agent_fd = connect_unix(agent_path);
	if (agent_fd < 0) {
		/* Cloud Hypervisor closes the connection when nobody listens. */
		goto out;
	}
	pthread_mutex_lock(&conn_lock);
	serial = ++conn_serial;
	pthread_mutex_unlock(&conn_lock);
	snprintf(reply, sizeof(reply), "OK %u\n", 1073741824u + serial);
	if (write_all(fd, reply, strlen(reply)) < 0)
		goto out;
	proxy(fd, agent_fd);
out:
	pthread_mutex_lock(&conn_lock);
	conn_count--;
	pthread_mutex_unlock(&conn_lock);
	return NULL;
}

static void accept_hvsock(int listen_fd)
{
	pthread_attr_t attr;
	pthread_t thread;
	int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return;
	pthread_mutex_lock(&conn_lock);
	if (conn_count >= MAX_CONNECTIONS) {
		pthread_mutex_unlock(&conn_lock);
		close(fd);
		return;
	}
	conn_count++;
	pthread_mutex_unlock(&conn_lock);

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	if (pthread_create(&thread, &attr, connection_main, (void *)(intptr_t)fd) != 0) {
		close(fd);
		pthread_mutex_lock(&conn_lock);
		conn_count--;
		pthread_mutex_unlock(&conn_lock);
	}
	pthread_attr_destroy(&attr);
}

/* Wait for SIGTERM or SIGINT (blocked by the caller, taken here). */
static void wait_stop(const sigset_t *signals)
{
	int sig;

	while (sigwait(signals, &sig) != 0)
		;
}

static int forge_abstract(const char *path, const sigset_t *signals)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -1;
	int n;

	/* sun_path[0] = '\0': abstract.  The table prints it as '@' and the
	 * rest verbatim, newline included. */
	n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1,
		     "\n0000000000000000: 00000002 00000000 00010000 0001 01 4242 %s", path);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path) - 1) {
		fprintf(stderr, "test-vmm: %s: path too long to forge\n", path);
		return 1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 ||
	    bind(fd, (struct sockaddr *)&sa,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)) < 0 ||
	    listen(fd, 1) < 0) {
		perror("test-vmm: forged abstract socket");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	wait_stop(signals);
	return 0;
}

/* Make count sockets (socket pairs) and keep them until stop (EOF on it). */
static _Noreturn void make_sockets(unsigned long count, int ready_fd, int stop_fd)
{
	char byte;
	int pair[2];

	for (unsigned long i = 0; i < count; i += 2)
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0) {
			perror("test-vmm: socketpair");
			_exit(1);
		}
	if (write(ready_fd, "r", 1) != 1)
		_exit(1);
	while (read(stop_fd, &byte, 1) < 0 && errno == EINTR)
		;
	_exit(0);
}

/* Hold count sockets, in as many processes as the descriptor limit needs
 * (a process may not raise its hard limit). */
static int hold_sockets(unsigned long count, const sigset_t *signals)
{
	struct rlimit rl;
	unsigned long per_process;
	int ready[2], stop[2];
	unsigned children = 0;
	char byte;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || pipe(ready) < 0 || pipe(stop) < 0) {
		perror("test-vmm: --sockets");
		return 1;
	}
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	per_process = rl.rlim_cur > 128 ? (rl.rlim_cur - 64) & ~1UL : 2;
	for (unsigned long made = 0; made < count; made += per_process) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("test-vmm: fork");
			return 1;
		}
		if (pid == 0) {
			close(stop[1]);
			make_sockets(count - made < per_process ? count - made : per_process,
				     ready[1], stop[0]);
		}
		children++;
	}
	close(stop[0]);
	for (unsigned i = 0; i < children; i++)
		if (read(ready[0], &byte, 1) != 1) {
			fprintf(stderr, "test-vmm: a socket holder failed\n");
			return 1;
		}
	printf("ready\n");
	fflush(stdout);
	wait_stop(signals);
	return 0; /* the holders see EOF on stop and exit */
}

int main(int argc, char **argv)
{
	enum {
		OPT_HVSOCK = 0x100,
		OPT_CONTROL,
		OPT_AGENT,
		OPT_NEVER,
		OPT_GATE,
		OPT_LOG,
		OPT_CHROOT,
		OPT_FORGE,
		OPT_SOCKETS
	};
	static const struct option long_options[] = {
		{ "hvsock", required_argument, NULL, OPT_HVSOCK },
		{ "control", required_argument, NULL, OPT_CONTROL },
		{ "agent", required_argument, NULL, OPT_AGENT },
		{ "never-answer", no_argument, NULL, OPT_NEVER },
		{ "gate", required_argument, NULL, OPT_GATE },
		{ "connect-log", required_argument, NULL, OPT_LOG },
		{ "chroot", required_argument, NULL, OPT_CHROOT },
		{ "forge-abstract", required_argument, NULL, OPT_FORGE },
		{ "sockets", required_argument, NULL, OPT_SOCKETS },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	_cleanup_close_ int hvsock_fd = -1, control_fd = -1, signal_fd = -1;
	sigset_t signals;
	int c;

	while ((c = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
		switch (c) {
		case OPT_HVSOCK:
			hvsock_path = optarg;
			break;
		case OPT_CONTROL:
			control_path = optarg;
			break;
		case OPT_AGENT:
			if (strncmp(optarg, "unix:/", 6) != 0) {
				fprintf(stderr, "test-vmm: --agent takes unix:/ABSOLUTE/PATH\n");
				return 2;
			}
			agent_path = optarg + 5;
			break;
		case OPT_NEVER:
			never_answer = 1;
			break;
		case OPT_GATE:
			gate_path = optarg;
			break;
		case OPT_LOG:
			connect_log_path = optarg;
			break;
		case OPT_CHROOT:
			chroot_dir = optarg;
			break;
		case OPT_FORGE:
			forge_path = optarg;
			break;
		case OPT_SOCKETS:
			socket_count = strtoul(optarg, NULL, 10);
			if (socket_count == 0 || socket_count > 1000000) {
				fprintf(stderr, "test-vmm: --sockets takes 1..1000000\n");
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc ||
	    ((forge_path || socket_count) ?
		     hvsock_path || control_path || (forge_path && socket_count) :
		     !hvsock_path || !control_path || (!agent_path && !never_answer))) {
		usage(stderr);
		return 2;
	}

	sigemptyset(&signals);
	sigaddset(&signals, SIGTERM);
	sigaddset(&signals, SIGINT);
	sigaddset(&signals, SIGPIPE);
	/* Blocked before any thread exists, so every thread inherits it. */
	pthread_sigmask(SIG_BLOCK, &signals, NULL);
	sigdelset(&signals, SIGPIPE);
	if (forge_path)
		return forge_abstract(forge_path, &signals);
	if (socket_count)
		return hold_sockets(socket_count, &signals);
	signal_fd = signalfd(-1, &signals, SFD_CLOEXEC);
	if (signal_fd < 0) {
		perror("test-vmm: signalfd");
		return 1;
	}
	if (gate_path) {
		/* O_RDWR: a FIFO that never sees EOF, whoever opens and closes it. */
		gate_fd = open(gate_path, O_RDWR | O_CLOEXEC);
		if (gate_fd < 0) {
			fprintf(stderr, "test-vmm: %s: %s\n", gate_path, strerror(errno));
			return 1;
		}
	}
	if (connect_log_path) {
		connect_log_fd = open(connect_log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
				      0644);
		if (connect_log_fd < 0) {
			fprintf(stderr, "test-vmm: %s: %s\n", connect_log_path, strerror(errno));
			return 1;
		}
	}
	if (chroot_dir && (chroot(chroot_dir) < 0 || chdir("/") < 0)) {
		fprintf(stderr, "test-vmm: chroot %s: %s\n", chroot_dir, strerror(errno));
		return 1;
	}
	control_fd = listen_unix(control_path, true);
	if (control_fd < 0)
		return 1;
	hvsock_fd = listen_unix(hvsock_path, false);
	if (hvsock_fd < 0) {
		unlink(control_path);
		return 1;
	}

	for (;;) {
		struct pollfd p[3] = {
			{ .fd = hvsock_fd, .events = POLLIN },
			{ .fd = control_fd, .events = POLLIN },
			{ .fd = signal_fd, .events = POLLIN },
		};
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("test-vmm: poll");
			break;
		}
		if (p[2].revents)
			break;
		if (p[0].revents)
			accept_hvsock(hvsock_fd);
		if (p[1].revents) {
			int fd = accept4(control_fd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0)
				close(fd);
		}
	}
	unlink(hvsock_path);
	unlink(control_path);
	return 0;
}
