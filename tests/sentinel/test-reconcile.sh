#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Stale-claim reconcile with real processes: a claim whose VMM is certainly
# dead (nothing listens on its control path, be the path missing or the
# socket file left by a SIGKILLed VMM; or its pid is gone) is released and its
# VF can be claimed again; a claim whose VMM lives (a socket listening on its
# control path, or its pid running) is kept.  Uncertain verdicts (an
# unreadable /proc) are in test-liveness-fake.sh.
source "$(dirname "$0")/lib.sh"

# --control-grace 0: judged at once (the startup grace is test-late-bind.sh's).
start_daemon --poll-interval 3600 --reconcile-interval 0.2 --control-grace 0
for vf in 0000:41:00.1 0000:41:00.2 0000:41:00.3 0000:41:00.4 0000:41:00.5; do
	register_vf "$vf"
done
start_vmm live --never-answer
start_dead_vmm killed --never-answer
start_sleeper RUNNING
true &
EXITED=$!
wait "$EXITED"

claim 0000:41:00.1 dead-nopid "control=$T/none-1.ctl"
claim 0000:41:00.2 dead-exited "pid=$EXITED"
claim 0000:41:00.3 dead-killed "control=$T/killed.ctl"
claim 0000:41:00.4 alive-ctl "control=$T/live.ctl"
claim 0000:41:00.5 alive-pid "pid=$RUNNING"

wait_for 20 "dead claims released" metric_ge vfhealth_sentinel_claims_released_total 3
[[ ! -e $MNT/0000:41:00.1/assignments/dead-nopid ]] || fail "dead-nopid kept"
[[ ! -e $MNT/0000:41:00.2/assignments/dead-exited ]] || fail "dead-exited kept"
[[ ! -e $MNT/0000:41:00.3/assignments/dead-killed ]] || fail "dead-killed kept"
grep -q "^<6>.*vf 0000:41:00.1: released the claim of dead-nopid" "$T/daemon.log" ||
	fail "release not logged"
# Several more reconcile passes, then the live claims still stand.
wait_for 20 "more reconcile passes" metric_ge vfhealth_sentinel_reconciles_total \
	"$(($(metric vfhealth_sentinel_reconciles_total) + 3))"
for c in 0000:41:00.4/assignments/alive-ctl 0000:41:00.5/assignments/alive-pid; do
	[[ -f $MNT/$c ]] || fail "$c released"
done
[[ $(metric vfhealth_sentinel_claims_released_total) == 3 ]] || fail "released more than the dead"
[[ $(metric vfhealth_sentinel_liveness_uncertain_total) == 0 ]] || fail "an uncertain verdict with a readable /proc"
# The VF of a released claim is back in the pool.
claim 0000:41:00.1 next-vm
[[ -f $MNT/0000:41:00.1/assignments/next-vm ]] || fail "cannot claim the freed VF"

# The process behind alive-pid exits: now it is dead.
kill "$RUNNING"
wait "$RUNNING" || true
wait_for 20 "alive-pid released after its process exited" \
	test ! -e "$MNT/0000:41:00.5/assignments/alive-pid"
[[ -f $MNT/0000:41:00.4/assignments/alive-ctl ]] || fail "alive-ctl released"
echo PASS
