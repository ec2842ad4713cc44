#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# --no-sentinel stops polling, not stale-claim release: vfhealthd runs
# vfhealth-sentinel --reconcile-only, which releases the claim of a dead VMM
# and dials no agent.  --no-reconcile stops release, not polling: the dead
# claim stays, never polled.
source "$(dirname "$0")/lib.sh"

DEAD=0000:41:00.1
LIVE=0000:41:00.2
start_agent g1
agent_fail g1
start_vmm g1 --agent "unix:$T/g1.sock" --connect-log "$T/connects"
start_dead_vmm killed --never-answer

# 1. --no-sentinel: released, nothing polled.
# --control-grace 0: judged at once (the startup grace is test-late-bind.sh's).
start_daemon --no-sentinel --poll-interval 0.1 --reconcile-interval 0.2 --control-grace 0
register_vf "$DEAD"
register_vf "$LIVE"
claim "$DEAD" vm-dead "agent=hvsock:$T/g1.hv:2222" "control=$T/killed.ctl"
claim "$LIVE" vm-live "agent=hvsock:$T/g1.hv:2222" "control=$T/g1.ctl"
wait_for 20 "the dead claim released under --no-sentinel" test ! -e "$MNT/$DEAD/assignments/vm-dead"
# logged once the sentinel has read the release's outcome, after the claim is gone
wait_for 20 "the release logged" grep -q "^<6>.*vf $DEAD: released the claim of vm-dead .*VMM dead" "$T/daemon.log"
grep -q "not polling agents; releasing stale claims under $MNT" "$T/daemon.log" ||
	fail "the reconcile-only sentinel does not say so"
wait_for 20 "more reconcile passes" metric_ge vfhealth_sentinel_reconciles_total \
	$(($(metric vfhealth_sentinel_reconciles_total) + 3))
[[ -f $MNT/$LIVE/assignments/vm-live ]] || fail "the live claim was released"
[[ $(metric vfhealth_sentinel_polls_total) == 0 ]] || fail "--no-sentinel polled"
[[ $(lines_in "$T/connects") == 0 ]] || fail "--no-sentinel dialled an agent"
file_is "$MNT/$LIVE/tally" 0 || fail "--no-sentinel reported"
stop_daemon

# 2. --no-reconcile: polled, but the dead claim stays.
start_daemon --no-reconcile --poll-interval 0.1 --poll-timeout 2 --control-grace 0
claim "$DEAD" vm-dead "agent=hvsock:$T/g1.hv:2222" "control=$T/killed.ctl"
wait_for 20 "the live claim polled" file_is "$MNT/$LIVE/tally" 1
wait_polls 5
[[ -f $MNT/$DEAD/assignments/vm-dead ]] || fail "--no-reconcile released a claim"
[[ $(metric vfhealth_sentinel_reconciles_total) == 0 ]] || fail "--no-reconcile reconciled"
[[ $(metric vfhealth_sentinel_claims_released_total) == 0 ]] || fail "--no-reconcile released"
[[ $(metric 'vfhealth_sentinel_claims{watch="dead"}') == 1 ]] || fail "the dead claim not counted"
[[ $(metric 'vfhealth_sentinel_claims{watch="polled"}') == 1 ]] || fail "the live claim not counted"
file_is "$MNT/$DEAD/tally" 0 || fail "the dead claim was polled"
echo PASS
