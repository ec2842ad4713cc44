/* SPDX-License-Identifier: MIT */
/*
 * server.h - the agent's event loop: answer GetGPUInitStatus on the listen
 * endpoint, watch the kernel log, run the probe.  One thread; see the design
 * notes in server.c.
 *
 * Limits on what clients control: at most max_clients connections at once
 * (further clients wait in the listen backlog until a slot frees), one
 * request per connection, frames of at most FRAME_PAYLOAD_MAX bytes, and a
 * deadline of client_timeout_ns from accept to the last byte of the answer.
 */
#ifndef VFHEALTH_AGENT_SERVER_H
#define VFHEALTH_AGENT_SERVER_H

#include <stdint.h>

#include "common/endpoint.h"
#include "common/parse.h"

#define AGENT_DEFAULT_KMSG "/dev/kmsg"
#define AGENT_DEFAULT_SYSFS "/sys"
#define AGENT_DEFAULT_DEV_DIR "/dev"
#define AGENT_DEFAULT_LISTEN "vsock:any:2222"
#define AGENT_DEFAULT_MAX_CLIENTS 64
#define AGENT_DEFAULT_CLIENT_TIMEOUT_NS (5 * NSEC_PER_SEC)
/* Wait before reopening the kernel log after a read error. */
#define AGENT_KMSG_REOPEN_NS (5 * NSEC_PER_SEC)

struct agent_options {
	struct endpoint listen;
	const char *kmsg_path;
	const char *sysfs_root;
	const char *nvidia_smi; /* NULL: look on $PATH */
	const char *dev_dir;    /* the device probe's nodes; NULL: no device probe */
	const char *rules_path; /* more kmsg rules (kmsg.h); NULL: the built-in one */
	int64_t probe_interval_ns, probe_window_ns, probe_timeout_ns;
	int64_t probe_backoff_max_ns; /* 0: stop probing at the window's end */
	int64_t client_timeout_ns;
	unsigned max_clients;
};

/* Defaults for everything but nothing required. */
void agent_options_init(struct agent_options *o);

/* Run until SIGTERM or SIGINT.  Returns 0 after a clean shutdown, or -errno
 * when setup failed (the rules file, the listen socket, the signal fd). */
int agent_run(const struct agent_options *o);

#endif
