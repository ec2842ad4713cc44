#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Stale-claim reconcile: a claim whose VMM is certainly dead (control socket
# gone and no pid, or its pid gone) is released and its VF can be claimed
# again; a claim whose VMM may be alive (control socket present, or pid
# running) is kept; an uncertain one (the control path cannot be checked) is
# kept with a warning and vfhealth_sentinel_liveness_uncertain_total.
source "$(dirname "$0")/lib.sh"

start_daemon --poll-interval 3600 --reconcile-interval 0.2
for vf in 0000:41:00.1 0000:41:00.2 0000:41:00.3 0000:41:00.4 0000:41:00.5; do
	register_vf "$vf"
done
start_vmm live --never-answer
sleep 3600 &
RUNNING=$!
BG_PIDS+=("$RUNNING")
true &
EXITED=$!
wait "$EXITED"
ln -s "$T/loop" "$T/loop" # stat through it: ELOOP, neither there nor gone

claim 0000:41:00.1 dead-nopid "control=$T/none-1.ctl"
claim 0000:41:00.2 dead-exited "control=$T/none-2.ctl" "pid=$EXITED"
claim 0000:41:00.3 uncertain "control=$T/loop/vm.ctl"
claim 0000:41:00.4 alive-ctl "control=$T/live.ctl"
claim 0000:41:00.5 alive-pid "control=$T/none-5.ctl" "pid=$RUNNING"

wait_for 20 "dead claims released" metric_ge vfhealth_sentinel_claims_released_total 2
[[ ! -e $MNT/0000:41:00.1/assignments/dead-nopid ]] || fail "dead-nopid kept"
[[ ! -e $MNT/0000:41:00.2/assignments/dead-exited ]] || fail "dead-exited kept"
grep -q "^<6>.*vf 0000:41:00.1: released the claim of dead-nopid" "$T/daemon.log" ||
	fail "release not logged"
# Several more reconcile passes, then the live and uncertain claims still stand.
wait_for 20 "uncertain checks" metric_ge vfhealth_sentinel_liveness_uncertain_total 3
for c in 0000:41:00.3/assignments/uncertain 0000:41:00.4/assignments/alive-ctl \
	0000:41:00.5/assignments/alive-pid; do
	[[ -f $MNT/$c ]] || fail "$c released"
done
grep -q "^<4>.*vf 0000:41:00.3: keeping the claim of uncertain" "$T/daemon.log" ||
	fail "no warning for the uncertain claim"
[[ $(metric vfhealth_sentinel_claims_released_total) == 2 ]] || fail "released more than the dead"
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
