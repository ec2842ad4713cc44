#!/bin/bash
# vfhealth-agent listening on vsock:any:PORT, queried over AF_VSOCK by CID
# (the local CID 1).  Skips (77) where the machine cannot connect to itself
# over vsock (no vsock_loopback transport, as on most hosts and guests).
#
# Programs: VFHEALTH_AGENT, AGENT_PEER (set by meson).
. "$(dirname "$0")/lib.sh"

rc=0; "$PEER" vsock-loopback || rc=$?
[ "$rc" -eq 0 ] || skip "no AF_VSOCK loopback transport"

AGENT_PID=
on_exit 'if [ -n "$AGENT_PID" ]; then kill "$AGENT_PID"; wait "$AGENT_PID"; fi 2>/dev/null'
PORT=$(( 40000 + $$ % 20000 ))

"$AGENT" -v --listen "vsock:any:$PORT" --sysfs-root "$T" </dev/null >/dev/null 2>"$LOG" &
AGENT_PID=$!
wait_until 10 query_is "vsock:1:$PORT" 2 || fail "vsock query: rc $Q_RC: $Q_OUT"
echo PASS
