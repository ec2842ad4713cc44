/* SPDX-License-Identifier: MIT */
/*
 * agent-peer - test peers for the vfhealth-agent integration tests.
 *
 *   agent-peer vmm LISTEN_PATH AGENT_PATH PORT
 *       A fake Cloud Hypervisor / Firecracker hybrid-vsock socket: accepts on
 *       LISTEN_PATH, reads "CONNECT <n>\n"; when n == PORT answers "OK 1\n"
 *       and relays the stream to the agent's Unix socket AGENT_PATH,
 *       otherwise closes (as a VMM does when no guest listens on n).  Serves
 *       connections one after another until killed.
 *   agent-peer abuse AGENT_PATH AGENT_PID CLIENT_TIMEOUT_S
 *       Hostile clients against a running agent: unknown method, garbage,
 *       an oversized frame, 100 slow-loris connections (the agent must cap
 *       its descriptors and still answer a real query once its per-client
 *       deadline frees slots).  Exit 0 when the agent held up.
 *   agent-peer concurrent AGENT_PATH THREADS
 *       THREADS threads call agent_query on the agent at once (the way the
 *       sentinel does); all must get the same answer.
 *   agent-peer vsock-loopback
 *       Exit 0 when this machine can connect to itself over AF_VSOCK, 77 if
 *       not (so the vsock tests skip instead of failing).
 *
 * Design notes
 *
 * Threads: only `concurrent` starts any: CONCURRENT_MAX workers, each doing
 * one agent_query into its own slot of an array; main joins them all.
 * Locks: none (no shared writes; the endpoint is read-only).  Shutdown:
 * every query has its own deadline, so every join is bounded.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#include "common/cleanup.h"
#include "proto/client.h"
#include "proto/frame.h"
#include "common/parse.h"

#define SEC 1000000000LL
#define SLOW_CLIENTS 100

static int unix_connect(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Copy both ways until both sides are done. */
static void relay(int a, int b)
{
	bool a_open = true, b_open = true;
	char buf[4096];

	while (a_open || b_open) {
		struct pollfd p[2] = { { .fd = a_open ? a : -1, .events = POLLIN },
				       { .fd = b_open ? b : -1, .events = POLLIN } };
		if (poll(p, 2, 10000) <= 0)
			return;
		for (int i = 0; i < 2; i++) {
			int from = i ? b : a, to = i ? a : b;
			ssize_t n;

			if (!p[i].revents)
				continue;
			n = read(from, buf, sizeof(buf));
			if (n <= 0) {
				shutdown(to, SHUT_WR);
				if (i)
					b_open = false;
				else
					a_open = false;
				continue;
			}
			if (write(to, buf, (size_t)n) != n)
				return;
		}
	}
}

static int run_vmm(const char *listen_path, const char *agent_path, const char *port)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	_cleanup_close_ int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char expect[64];

	snprintf(expect, sizeof(expect), "CONNECT %s", port);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", listen_path);
	if (bind(lfd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(lfd, 16) < 0) {
		perror("vmm: listen");
		return 1;
	}
	for (;;) {
		_cleanup_close_ int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		_cleanup_close_ int agent = -1;
		char line[64];
		size_t n = 0;
		char ch;

		if (c < 0)
			continue;
		while (n + 1 < sizeof(line) && read(c, &ch, 1) == 1 && ch != '\n')
			line[n++] = ch;
		line[n] = '\0';
		if (strcmp(line, expect) != 0) {
			fprintf(stderr, "vmm: '%s' is not '%s': closing\n", line, expect);
			continue;
		}
		agent = unix_connect(agent_path);
		if (agent < 0) {
			fprintf(stderr, "vmm: agent %s: %s\n", agent_path, strerror(errno));
			continue;
		}
		if (write(c, "OK 1\n", 5) != 5)
			continue;
		relay(c, agent);
	}
}

/* Send raw bytes, read one frame back.  The answer's decode result, or
 * -ECONNRESET when the agent closed without a frame. */
static int exchange(const char *path, const void *bytes, size_t len, int64_t *took_ns)
{
	_cleanup_close_ int fd = unix_connect(path);
	struct frame_reader r;
	struct agent_status st;
	int64_t start = monotonic_ns();
	int k;

	if (fd < 0)
		return -errno;
	if (write(fd, bytes, len) != (ssize_t)len)
		return -EIO;
	frame_reader_init(&r);
	k = frame_reader_fill(&r, fd); /* blocking fd: a frame or an error */
	*took_ns = monotonic_ns() - start;
	if (k == 1)
		k = wire_decode_status_response(r.payload, r.payload_len, &st);
	else if (k == -EPIPE)
		k = -ECONNRESET;
	frame_reader_free(&r);
	return k;
}

static int count_fds(const char *pid)
{
	char path[64];
	_cleanup_closedir_ DIR *d = NULL;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%s/fd", pid);
	d = opendir(path);
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	return n - 2;
}

#define CHECK(cond, ...)                                        \
	do {                                                    \
		if (!(cond)) {                                  \
			fprintf(stderr, "abuse: " __VA_ARGS__); \
			fprintf(stderr, "\n");                  \
			return 1;                               \
		}                                               \
	} while (0)

static int run_abuse(const char *path, const char *pid, const char *client_timeout)
{
	_cleanup_free_ uint8_t *req = NULL;
	size_t req_len;
	int64_t took, timeout_ns;
	int fds_before, fds_during, k;
	int slow[SLOW_CLIENTS];
	struct endpoint ep;
	struct agent_status st;
	char ep_text[ENDPOINT_STRING_MAX];

	CHECK(parse_seconds(client_timeout, 60 * SEC, &timeout_ns) == 0, "bad timeout");
	snprintf(ep_text, sizeof(ep_text), "unix:%s", path);
	CHECK(endpoint_parse(ep_text, &ep) == 0, "bad endpoint");

	/* An unknown method: answered "unimplemented". */
	CHECK(wire_encode_request("Reboot", &req, &req_len) == 0, "encode");
	k = exchange(path, req, req_len, &took);
	CHECK(k == -EOPNOTSUPP, "unknown method: %s", strerror(-k));

	/* Garbage in a well-formed frame: an ERROR answer. */
	k = exchange(path, "\0\0\0\4\xff\xff\xff\xff", 8, &took);
	CHECK(k == -EPROTO, "garbage: %s", strerror(-k));

	/* An oversized frame: closed at once, not at the deadline. */
	k = exchange(path, "\x7f\xff\xff\xff", 4, &took);
	CHECK(k == -ECONNRESET, "oversized: %s", strerror(-k));
	CHECK(took < timeout_ns / 2, "oversized frame held for %.3fs", (double)took / SEC);

	/* Slow-loris: far more connections than the cap, each one byte in. */
	fds_before = count_fds(pid);
	for (int i = 0; i < SLOW_CLIENTS; i++) {
		slow[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		struct sockaddr_un sun = { .sun_family = AF_UNIX };
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
		/* EAGAIN once the backlog is full: those never get in at all */
		if (connect(slow[i], (struct sockaddr *)&sun, sizeof(sun)) == 0)
			k = (int)write(slow[i], "\0", 1);
	}
	/* Let the agent accept what it will; its descriptor count must stay
	 * within the cap (64) plus its own few. */
	int64_t settle = monotonic_ns() + timeout_ns / 2;
	fds_during = count_fds(pid);
	while (monotonic_ns() < settle) {
		poll(NULL, 0, 20);
		fds_during = MAX(fds_during, count_fds(pid));
	}
	CHECK(fds_during <= fds_before + 64, "agent holds %d fds (was %d)", fds_during, fds_before);

	/* A real query still gets through once the deadline frees slots. */
	int64_t start = monotonic_ns();
	k = agent_query(&ep, timeout_ns * 4 + 3 * SEC, -1, &st);
	took = monotonic_ns() - start;
	CHECK(k == 0, "query during slow-loris: %s", strerror(-k));
	CHECK(took <= timeout_ns * 2 + 2 * SEC, "query took %.3fs", (double)took / SEC);
	for (int i = 0; i < SLOW_CLIENTS; i++)
		close(slow[i]);

	/* And the agent is fine afterwards. */
	start = monotonic_ns();
	k = agent_query(&ep, 2 * SEC, -1, &st);
	CHECK(k == 0, "query after abuse: %s", strerror(-k));
	printf("abuse: held up; %d fds at most under %d slow clients; query in %.3fs\n", fds_during,
	       SLOW_CLIENTS, (double)took / SEC);
	return 0;
}

#define CONCURRENT_MAX 256

struct worker {
	pthread_t thread;
	const struct endpoint *ep;
	struct agent_status st;
	int result;
};

static void *worker_query(void *arg)
{
	struct worker *w = arg;

	w->result = agent_query(w->ep, 10 * SEC, -1, &w->st);
	return NULL;
}

static int run_concurrent(const char *path, const char *threads)
{
	static struct worker workers[CONCURRENT_MAX];
	struct endpoint ep;
	char ep_text[ENDPOINT_STRING_MAX];
	uint64_t n;

	CHECK(parse_uint64(threads, 1, CONCURRENT_MAX, &n) == 0, "bad thread count");
	snprintf(ep_text, sizeof(ep_text), "unix:%s", path);
	CHECK(endpoint_parse(ep_text, &ep) == 0, "bad endpoint");
	for (uint64_t i = 0; i < n; i++) {
		workers[i].ep = &ep;
		CHECK(pthread_create(&workers[i].thread, NULL, worker_query, &workers[i]) == 0,
		      "pthread_create");
	}
	for (uint64_t i = 0; i < n; i++)
		pthread_join(workers[i].thread, NULL);
	for (uint64_t i = 0; i < n; i++) {
		CHECK(workers[i].result == 0, "query %llu: %s", (unsigned long long)i,
		      strerror(-workers[i].result));
		CHECK(workers[i].st.state == workers[0].st.state &&
			      strcmp(workers[i].st.message, workers[0].st.message) == 0,
		      "query %llu answered differently", (unsigned long long)i);
	}
	printf("concurrent: %llu queries answered %s\n", (unsigned long long)n,
	       gpu_init_state_name(workers[0].st.state));
	return 0;
}

static int run_vsock_loopback(void)
{
	struct sockaddr_vm addr = { .svm_family = AF_VSOCK,
				    .svm_cid = VMADDR_CID_ANY,
				    .svm_port = 30000 + (unsigned)getpid() % 20000 };
	struct sockaddr_vm to = { .svm_family = AF_VSOCK, .svm_cid = 1 };
	struct timeval tv = { .tv_sec = 1 };
	_cleanup_close_ int l = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
	_cleanup_close_ int c = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (l < 0 || c < 0 || bind(l, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    listen(l, 1) < 0) {
		printf("no AF_VSOCK listen here: %s\n", strerror(errno));
		return 77;
	}
	to.svm_port = addr.svm_port;
	setsockopt(c, AF_VSOCK, SO_VM_SOCKETS_CONNECT_TIMEOUT, &tv, sizeof(tv));
	if (connect(c, (struct sockaddr *)&to, sizeof(to)) < 0) {
		printf("no AF_VSOCK loopback here: %s\n", strerror(errno));
		return 77;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "vmm") == 0)
		return run_vmm(argv[2], argv[3], argv[4]);
	if (argc == 5 && strcmp(argv[1], "abuse") == 0)
		return run_abuse(argv[2], argv[3], argv[4]);
	if (argc == 4 && strcmp(argv[1], "concurrent") == 0)
		return run_concurrent(argv[2], argv[3]);
	if (argc == 2 && strcmp(argv[1], "vsock-loopback") == 0)
		return run_vsock_loopback();
	fprintf(stderr, "usage: agent-peer vmm|abuse|vsock-loopback ...\n");
	return 2;
}
