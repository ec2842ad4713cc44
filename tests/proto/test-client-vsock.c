/* SPDX-License-Identifier: MIT */
/* agent_query over real AF_VSOCK, to the local CID (vsock loopback).  Skips
 * (exit 77) where this machine has no vsock transport that can carry a
 * connection to itself: a plain blocking connect is tried first, outside the
 * code under test, to tell "no facility" from "client bug". */
/*
 * Design notes
 *
 * Threads: main (the client) and one server thread that accepts two
 * connections (the facility probe's and the query's).  Locks: none; the
 * listening fd is set before the thread starts.  Shutdown: the server
 * returns after its second connection; main joins it after the query.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#include "common/cleanup.h"
#include "proto/client.h"
#include "proto/frame.h"
#include "common/parse.h"

#ifndef VMADDR_CID_LOCAL
#define VMADDR_CID_LOCAL 1
#endif

#define SKIP 77

static int listen_fd = -1;

/* Serve two connections: the facility probe, then the query. */
static void *serve(void *arg)
{
	for (int i = 0; i < 2; i++) {
		_cleanup_close_ int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
		_cleanup_free_ uint8_t *out = NULL;
		struct agent_status st = { .state = GPU_INIT_OK };
		struct frame_reader r;
		size_t len;

		if (fd < 0)
			return NULL;
		frame_reader_init(&r);
		if (frame_reader_fill(&r, fd) != 1) {
			frame_reader_free(&r);
			continue; /* the probe closes without a request */
		}
		frame_reader_free(&r);
		if (wire_encode_status_response(&st, &out, &len) == 0)
			fd_write_all(fd, out, len, monotonic_ns() + 5000000000LL, -1);
	}
	return NULL;
}

int main(void)
{
	struct sockaddr_vm addr = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY };
	struct endpoint ep;
	struct agent_status st;
	pthread_t thread;
	char s[64];
	int r;

	listen_fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listen_fd < 0) {
		printf("SKIP: socket(AF_VSOCK): %s\n", strerror(errno));
		return SKIP;
	}
	addr.svm_port = 20000 + (unsigned)getpid() % 20000;
	if (bind(listen_fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    listen(listen_fd, 4) < 0) {
		printf("SKIP: vsock listen: %s\n", strerror(errno));
		return SKIP;
	}

	/* Facility probe: can this machine connect to itself over vsock? */
	{
		struct sockaddr_vm to = { .svm_family = AF_VSOCK,
					  .svm_cid = VMADDR_CID_LOCAL,
					  .svm_port = addr.svm_port };
		struct timeval tv = { .tv_sec = 1 };
		_cleanup_close_ int probe = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);

		setsockopt(probe, AF_VSOCK, SO_VM_SOCKETS_CONNECT_TIMEOUT, &tv, sizeof(tv));
		if (connect(probe, (struct sockaddr *)&to, sizeof(to)) < 0) {
			printf("SKIP: no vsock loopback transport (connect to CID 1: %s)\n",
			       strerror(errno));
			return SKIP;
		}
	}
	if (pthread_create(&thread, NULL, serve, NULL) != 0)
		return 1;

	snprintf(s, sizeof(s), "vsock:%u:%u", VMADDR_CID_LOCAL, addr.svm_port);
	if (endpoint_parse(s, &ep) < 0)
		return 1;
	r = agent_query(&ep, 5000000000LL, -1, &st);
	pthread_join(thread, NULL);
	if (r < 0) {
		printf("FAIL: agent_query %s: %s\n", s, strerror(-r));
		return 1;
	}
	if (st.state != GPU_INIT_OK) {
		printf("FAIL: state %s\n", gpu_init_state_name(st.state));
		return 1;
	}
	printf("PASS: %s answered ok\n", s);
	return 0;
}
