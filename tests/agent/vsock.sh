#!/bin/bash
# vfhealth-agent listening on vsock:any:PORT, queried over AF_VSOCK by CID
# (the local CID 1).  Skips (77) where the machine cannot connect to itself
# over vsock (no vsock_loopback transport, as on most hosts and guests).
#
# usage: vsock.sh AGENT AGENT_PEER
set -eu
AGENT=$1
PEER=$2
. "$(dirname "$0")/lib.sh"

rc=0; "$PEER" vsock-loopback || rc=$?
[ "$rc" -eq 0 ] || skip "no AF_VSOCK loopback transport"

T=$(mktemp -d /tmp/vfh-agent-vsock.XXXXXX)
LOG=$T/agent.log
AGENT_PID=
trap 'if [ -n "$AGENT_PID" ]; then kill "$AGENT_PID"; wait "$AGENT_PID"; fi 2>/dev/null; rm -rf "$T"' EXIT
PORT=$(( 40000 + $$ % 20000 ))

"$AGENT" -v --listen "vsock:any:$PORT" --sysfs-root "$T" </dev/null >/dev/null 2>"$LOG" &
AGENT_PID=$!
until_deadline 10 query_is "vsock:1:$PORT" 2 || fail "vsock query: rc $Q_RC: $Q_OUT"
echo PASS
