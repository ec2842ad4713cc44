/* SPDX-License-Identifier: MIT */
/*
 * endpoint.h - where a guest agent listens and how the host reaches it.
 * The one copy of endpoint parsing, used by vfhealth-agent, the sentinel and
 * the filesystem (which validates the agent= key of an assignment).
 *
 *   connect forms:  vsock:CID[:PORT]     AF_VSOCK to a guest by context id
 *                   hvsock:PATH[:PORT]   hybrid vsock: a Unix socket of the VMM
 *                                        (Cloud Hypervisor, Firecracker) that
 *                                        takes "CONNECT PORT\n", answers "OK ...\n"
 *                   unix:PATH            a plain Unix stream socket
 *   listen forms:   vsock:any[:PORT]     vsock:CID[:PORT]   unix:PATH
 *
 * PORT defaults to 2222.  PATH is absolute and shorter than sun_path.
 * Anything else is -EINVAL.
 */
#ifndef VFHEALTH_ENDPOINT_H
#define VFHEALTH_ENDPOINT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#define ENDPOINT_DEFAULT_PORT 2222
#define ENDPOINT_STRING_MAX (sizeof(((struct sockaddr_un *)0)->sun_path) + 32)

enum endpoint_kind {
	ENDPOINT_VSOCK,
	ENDPOINT_HVSOCK,
	ENDPOINT_UNIX,
};

struct endpoint {
	enum endpoint_kind kind;
	uint32_t cid;  /* VSOCK: VMADDR_CID_ANY (-1U) for "any" (listen only) */
	uint32_t port; /* VSOCK and HVSOCK */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* HVSOCK and UNIX */
};

int endpoint_parse(const char *s, struct endpoint *ret);
int endpoint_parse_listen(const char *s, struct endpoint *ret);
/* Canonical string ("vsock:3:2222", "hvsock:/run/vm.sock:2222", "unix:/x"). */
int endpoint_format(const struct endpoint *e, char *buf, size_t size);

#endif
