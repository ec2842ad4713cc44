#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A claim without a pid whose control path has no socket listening on it is
# never polled (its vsock CID may belong to another guest by now): neither
# when the path is missing nor when the socket file is still there because
# its VMM was SIGKILLed.  A claim whose pid runs with its recorded start
# time is never judged dead for its socket alone: uncertain, kept, polled,
# warned once however many polls, counted in vfhealth_sentinel_claims.
# Every agent endpoint leads to a live guest that would answer FAILED.
source "$(dirname "$0")/lib.sh"

A=0000:41:00.4
B=0000:41:00.5
C=0000:41:00.6
# --control-grace 0: judged at once (the startup grace is test-late-bind.sh's).
start_daemon --poll-interval 0.2 --poll-timeout 2 --no-reconcile --control-grace 0
register_vf "$A"
register_vf "$B"
register_vf "$C"
start_agent g1
agent_fail g1
start_vmm g1 --agent "unix:$T/g1.sock" --connect-log "$T/connects"
start_dead_vmm dead --never-answer
start_sleeper RUNNING

claim "$B" vm-2 "agent=hvsock:$T/g1.hv:2222" "control=$T/dead.ctl"
claim "$C" vm-3 "agent=hvsock:$T/g1.hv:2222" "control=$T/gone.ctl"
wait_polls 5
[[ $(lines_in "$T/connects") == 0 ]] || fail "the agent of a VMM without a listening control socket was queried"
for r in ok failed unknown rpc_error; do
	[[ $(metric "vfhealth_sentinel_checks_total{result=\"$r\"}") == 0 ]] || fail "$r check counted"
done
file_is "$MNT/$B/tally" 0 || fail "reported for a SIGKILLed VMM"
file_is "$MNT/$C/tally" 0 || fail "reported without a control socket"
grep -q "vf $B: the VMM of vm-2 .* looks dead (no socket listening on the control path)" \
	"$T/daemon.log" || fail "dead verdict not logged"
[[ $(metric 'vfhealth_sentinel_claims{watch="dead"}') == 2 ]] || fail "dead claims not counted"

# The pid runs as recorded, its control socket is nowhere: polled, kept.
claim "$A" vm-1 "agent=hvsock:$T/g1.hv:2222" "control=$T/missing.ctl" "pid=$RUNNING"
wait_for 20 "tally 1 for the uncertain VMM" file_is "$MNT/$A/tally" 1
wait_polls 5
[[ $(metric 'vfhealth_sentinel_claims{watch="uncertain"}') == 1 ]] || fail "uncertain claim not counted"
[[ $(metric 'vfhealth_sentinel_claims{watch="dead"}') == 2 ]] || fail "dead claims not counted"
[[ $(grep -c "^<4>.*vf $A: keeping the claim of vm-1 .*process runs, but no socket listens on its control path" \
	"$T/daemon.log") == 1 ]] || fail "not warned exactly once"
! grep -q "vf $A: the VMM of vm-1 .* looks dead" "$T/daemon.log" || fail "a live VMM judged dead"
file_is "$MNT/$B/tally" 0 || fail "vm-2 polled"
file_is "$MNT/$C/tally" 0 || fail "vm-3 polled"
echo PASS
