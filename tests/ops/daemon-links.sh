#!/usr/bin/env bash
# daemon-links.sh - vfhealthd links no protobuf-c: the wire is the sentinel's
# and the agent's, and the daemon (root, serving the mount) carries none of
# its decoder.  It links libvfcounters, which names the agent's answers
# through libvfproto-status alone; a dependency on libvfproto (or
# libprotobuf-c) creeping back into the daemon's link graph fails here,
# whether shared (a NEEDED entry) or static (a protobuf_c_ symbol).  The
# sentinel program must show both, or the checks below look at nothing.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"

: "${VFHEALTHD:?}" "${VFHEALTH_SENTINEL:?}"

needed() { readelf -d -- "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
protobuf_symbols() { { nm -- "$1" 2>/dev/null || :; nm -D -- "$1"; } | grep -c 'protobuf_c_' || :; }

# The control: the sentinel decodes the wire, so the patterns must find it.
needed "$VFHEALTH_SENTINEL" | grep '^libprotobuf-c' >/dev/null ||
	fail "vfhealth-sentinel has no NEEDED libprotobuf-c: the check cannot see it"
(($(protobuf_symbols "$VFHEALTH_SENTINEL") > 0)) ||
	fail "vfhealth-sentinel has no protobuf_c_ symbol: the check cannot see it"

if needed "$VFHEALTHD" | grep '^libprotobuf-c'; then
	fail "vfhealthd links libprotobuf-c (readelf -d above): which of its libraries pulls libvfproto?"
fi
n=$(protobuf_symbols "$VFHEALTHD")
((n == 0)) || fail "vfhealthd holds $n protobuf_c_ symbols: libvfproto was linked in"
echo "vfhealthd: NEEDED $(needed "$VFHEALTHD" | tr '\n' ' ')"
