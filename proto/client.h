/* SPDX-License-Identifier: MIT */
/*
 * client.h - the host side of GetGPUInitStatus: one blocking call with a
 * deadline, safe to run from many threads at once (the sentinel runs up to
 * --concurrency of them).  Every step (connect, the hybrid-vsock CONNECT
 * handshake, write, read) is bounded by the one deadline; a peer that
 * trickles bytes, sends a huge length or garbage cannot hold the caller past
 * it or make it allocate more than one frame's budget.
 */
#ifndef VFHEALTH_CLIENT_H
#define VFHEALTH_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/endpoint.h"
#include "common/sockdir.h"
#include "proto/status.h"

/* Ask the agent at ep for its GPU init state.  timeout_ns bounds the whole
 * call.  cancel_fd, when >= 0, aborts the call with -ECANCELED as soon as it
 * becomes readable (the sentinel's shutdown eventfd).
 *
 * Returns 0 with *ret filled, or:
 *   -EOPNOTSUPP  the agent answered "unimplemented" (an older agent)
 *   -ETIMEDOUT   the deadline passed
 *   -EPROTO      bad handshake, bad frame, garbage, a response of the wrong type
 *   -ECANCELED   cancel_fd fired
 *   other -errno from connect (-ECONNREFUSED, -ENOENT, -ECONNRESET, ...) */
int agent_query(const struct endpoint *ep, int64_t timeout_ns, int cancel_fd,
		struct agent_status *ret);

/* agent_query(), reaching a unix: or hvsock: socket only through the
 * descriptor sockdirs_open(dirs, path) gives (common/sockdir.h), checked at
 * each call: nothing outside dirs is connected to, no symlink below them is
 * followed, and hvsock's CONNECT goes only to a socket inside them.
 * -EACCES (or -ENOENT, -ENOTDIR) from that check; -ENOTSOCK when the path is
 * not a socket.  vsock endpoints are unaffected.  dirs NULL: agent_query(). */
int agent_query_confined(const struct endpoint *ep, const struct sockdirs *dirs, int64_t timeout_ns,
			 int cancel_fd, struct agent_status *ret);

#endif
