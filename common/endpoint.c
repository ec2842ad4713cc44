/* SPDX-License-Identifier: MIT */
/* endpoint.c - parse and format agent endpoints.  Contract in endpoint.h.
 * Pure functions (no I/O): fuzzable. */
#include "common/endpoint.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/parse.h"

/* VMADDR_CID_ANY / VMADDR_PORT_ANY, without pulling linux/vm_sockets.h into
 * every user of this file. */
#define CID_ANY UINT32_MAX
#define PORT_ANY UINT32_MAX

static bool has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A port: decimal, 1 .. 2^32-2 (0 is not a service and -1 means "any"). */
static int parse_port(const char *s, uint32_t *ret)
{
	uint64_t v;
	int r = parse_uint64(s, 1, PORT_ANY - 1, &v);

	if (r < 0)
		return -EINVAL;
	*ret = (uint32_t)v;
	return 0;
}

/* "CID[:PORT]" or, when listening, "any[:PORT]". */
static int parse_vsock(const char *s, bool listen, struct endpoint *e)
{
	char cid[16];
	const char *colon = strchr(s, ':');
	size_t cid_len = colon ? (size_t)(colon - s) : strlen(s);
	uint64_t v;

	if (cid_len == 0 || cid_len >= sizeof(cid))
		return -EINVAL;
	memcpy(cid, s, cid_len);
	cid[cid_len] = '\0';

	if (strcmp(cid, "any") == 0) {
		if (!listen)
			return -EINVAL; /* a client needs a real guest */
		e->cid = CID_ANY;
	} else {
		if (parse_uint64(cid, 0, CID_ANY - 1, &v) < 0)
			return -EINVAL;
		e->cid = (uint32_t)v;
	}
	e->port = ENDPOINT_DEFAULT_PORT;
	if (colon && parse_port(colon + 1, &e->port) < 0)
		return -EINVAL;
	e->kind = ENDPOINT_VSOCK;
	return 0;
}

static int copy_path(const char *s, size_t len, struct endpoint *e)
{
	if (len == 0 || s[0] != '/' || len >= sizeof(e->path))
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return -EINVAL; /* no control characters: shown raw by cat and the log */
	memcpy(e->path, s, len);
	e->path[len] = '\0';
	return 0;
}

/* "PATH[:PORT]": the port is the text after the last ':' when it is all
 * digits; otherwise the whole string is the path. */
static int parse_hvsock(const char *s, struct endpoint *e)
{
	const char *colon = strrchr(s, ':');
	size_t path_len = strlen(s);

	e->port = ENDPOINT_DEFAULT_PORT;
	if (colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
		if (parse_port(colon + 1, &e->port) < 0)
			return -EINVAL;
		path_len = (size_t)(colon - s);
	} else if (colon && !colon[1])
		return -EINVAL; /* "PATH:" */
	if (copy_path(s, path_len, e) < 0)
		return -EINVAL;
	e->kind = ENDPOINT_HVSOCK;
	return 0;
}

static int parse_common(const char *s, bool listen, struct endpoint *ret)
{
	struct endpoint e = { 0 };
	int r;

	if (!s || !ret || strnlen(s, ENDPOINT_STRING_MAX + 1) > ENDPOINT_STRING_MAX)
		return -EINVAL;
	if (has_prefix(s, "vsock:"))
		r = parse_vsock(s + strlen("vsock:"), listen, &e);
	else if (has_prefix(s, "hvsock:"))
		/* the VMM owns that socket; an agent in the guest cannot listen there */
		r = listen ? -EINVAL : parse_hvsock(s + strlen("hvsock:"), &e);
	else if (has_prefix(s, "unix:")) {
		r = copy_path(s + strlen("unix:"), strlen(s + strlen("unix:")), &e);
		e.kind = ENDPOINT_UNIX;
	} else
		r = -EINVAL;
	if (r < 0)
		return r;
	*ret = e;
	return 0;
}

int endpoint_parse(const char *s, struct endpoint *ret)
{
	return parse_common(s, false, ret);
}

int endpoint_parse_listen(const char *s, struct endpoint *ret)
{
	return parse_common(s, true, ret);
}

int endpoint_format(const struct endpoint *e, char *buf, size_t size)
{
	int n;

	if (!e || !buf || size == 0)
		return -EINVAL;
	switch (e->kind) {
	case ENDPOINT_VSOCK:
		if (e->cid == CID_ANY)
			n = snprintf(buf, size, "vsock:any:%u", e->port);
		else
			n = snprintf(buf, size, "vsock:%u:%u", e->cid, e->port);
		break;
	case ENDPOINT_HVSOCK:
		n = snprintf(buf, size, "hvsock:%s:%u", e->path, e->port);
		break;
	case ENDPOINT_UNIX:
		n = snprintf(buf, size, "unix:%s", e->path);
		break;
	default:
		return -EINVAL;
	}
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= size)
		return -ENOBUFS;
	return 0;
}
