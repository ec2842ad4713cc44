#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A claim whose VMM has no socket listening on its control path is never
# polled (its vsock CID may belong to another guest by now): neither when the
# path is missing nor when the socket file is still there because its VMM was
# SIGKILLed, even with a pid that runs.  Both agent endpoints lead to a live
# guest that would answer FAILED; a live control socket is polled.
source "$(dirname "$0")/lib.sh"

A=0000:41:00.4
B=0000:41:00.5
C=0000:41:00.6
start_daemon --poll-interval 0.2 --poll-timeout 2 --no-reconcile
register_vf "$A"
register_vf "$B"
register_vf "$C"
start_agent g1
agent_fail g1
start_vmm g1 --agent "unix:$T/g1.sock" --connect-log "$T/connects"
start_vmm dead --never-answer
kill -KILL "${BG_PIDS[-1]}"
wait "${BG_PIDS[-1]}" 2>/dev/null || true
test -S "$T/dead.ctl" || fail "SIGKILL removed the control socket file"

# pid = this shell: a process that runs; its control socket still decides.
claim "$A" vm-1 "agent=hvsock:$T/g1.hv:2222" "control=$T/gone.ctl" "pid=$$"
claim "$B" vm-2 "agent=hvsock:$T/g1.hv:2222" "control=$T/dead.ctl"
wait_polls 5
[[ $(lines_in "$T/connects") == 0 ]] || fail "the agent of a VMM without a listening control socket was queried"
for r in ok failed unknown rpc_error; do
	[[ $(metric "vfhealth_sentinel_checks_total{result=\"$r\"}") == 0 ]] || fail "$r check counted"
done
file_is "$MNT/$A/tally" 0 || fail "reported without a control socket"
file_is "$MNT/$B/tally" 0 || fail "reported for a SIGKILLed VMM"
grep -q "vf $B: the VMM of vm-2 .* looks dead (no socket listening on the control path)" \
	"$T/daemon.log" || fail "dead verdict not logged"

# A claim with its control socket listening is polled (the checks above
# could otherwise pass for any reason).
claim "$C" vm-3 "agent=hvsock:$T/g1.hv:2222" "control=$T/g1.ctl"
wait_for 20 "tally 1 for the live VMM" file_is "$MNT/$C/tally" 1
[[ $(lines_in "$T/connects") -ge 1 ]] || fail "no query reached the VMM"
file_is "$MNT/$A/tally" 0 || fail "vm-1 polled"
file_is "$MNT/$B/tally" 0 || fail "vm-2 polled"
echo PASS
