#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Suspect VFs with real processes: a VMM SIGKILLed moments after its claim
# (within --init-window) is found dead by reconcile, which releases its
# claim with ended=crash and the earliest time it may have died: the VF
# reads suspect before any guest reports, ranks after every clean VF in
# `allocatable`, stays claimable, and the next guest's OK (a real agent
# polled through a test-vmm) clears it.  A VMM killed after the window
# leaves its VF ok.
source "$(dirname "$0")/lib.sh"

WINDOW=3
start_daemon --poll-interval 0.2 --reconcile-interval 0.2 --init-window "$WINDOW"
A=0000:41:00.1 B=0000:41:00.2 C=0000:41:00.3
for vf in "$A" "$B" "$C"; do
	register_vf "$vf"
done
reconciles() { metric vfhealth_sentinel_reconciles_total; }
# reconciled_since N: two passes after the count N (one judged the claim alive)
reconciled_since() { (($(reconciles) >= $1 + 2)); }
# vmm_dies PID INSTANCE VF: once a reconcile has judged INSTANCE's claim
# (alive), its VMM is SIGKILLed and the claim released.
vmm_dies() {
	local n
	n=$(reconciles)
	wait_for 20 "reconcile judging $2" reconciled_since "$n"
	kill -KILL "$1"
	wait "$1" 2>/dev/null || true
	wait_for 20 "$2 released" test ! -e "$MNT/$3/assignments/$2"
}

# --- killed during its init window: suspect
start_vmm early --never-answer
EARLY=${BG_PIDS[-1]}
claim "$A" vm-early "pid=$EARLY" "control=$T/early.ctl"
CLAIMED=$(claimed_at "$A" vm-early)
vmm_dies "$EARLY" vm-early "$A"
file_is "$MNT/$A/state" suspect || fail "not suspect: $(cat "$MNT/$A/state")"
grep -q "vf $A: suspect: the VMM of vm-early (claimed $CLAIMED) died [0-9]*\.[0-9]* s after its claim" \
	"$T/daemon.log" || fail "the suspicion is not logged"
grep -q " suspect vm-early claimed=$CLAIMED died=[^ ]* after=[0-2]\.[0-9]*s cleared=- why=-$" "$MNT/$A/history" ||
	fail "no suspicion in the history: $(cat "$MNT/$A/history")"
grep -q "^$CLAIMED claim vm-early released=[^ ]* ended=crashed " "$MNT/$A/history" ||
	fail "the claim did not end as crashed: $(cat "$MNT/$A/history")"
# last among the clean VFs on every read (each draws the order afresh)
for i in 1 2 3 4 5 6 7 8; do
	mapfile -t al <"$MNT/allocatable"
	[[ ${#al[@]} == 3 && ${al[2]} == "$A" ]] || fail "the suspect VF is not last (read $i): ${al[*]}"
done
[[ $(metric "vfhealth_vf_suspect{vf=\"$A\",parent=\"\"}") == 1 ]] || fail "vfhealth_vf_suspect"

# --- killed after the window: not suspect
start_vmm late --never-answer
LATE=${BG_PIDS[-1]}
claim "$B" vm-late "pid=$LATE" "control=$T/late.ctl"
LATE_AT=$(date -u -d "$(claimed_at "$B" vm-late)" +%s)
# the window is over once a reconcile that began after it judged the VMM alive
window_over() { (($(date -u +%s) > LATE_AT + WINDOW)); }
wait_for 20 "the init window of vm-late over" window_over
vmm_dies "$LATE" vm-late "$B"
file_is "$MNT/$B/state" ok || fail "a death after the window made $B $(cat "$MNT/$B/state")"

# --- the next guest on the suspect VF reports OK: cleared
start_agent g1
agent_make_ok g1
start_vmm g1
claim "$A" vm-next "agent=hvsock:$T/g1.hv:2222" "control=$T/g1.ctl"
NEXT=$(claimed_at "$A" vm-next)
wait_for 20 "the OK of vm-next clears the suspicion" file_is "$MNT/$A/state" ok
grep -q "$A: no longer suspect: instance vm-next (claimed $NEXT) succeeded" "$T/daemon.log" ||
	fail "the clearing is not logged"
grep -q " suspect vm-early claimed=$CLAIMED .* why=ok:vm-next$" "$MNT/$A/history" ||
	fail "the history does not say what cleared it: $(cat "$MNT/$A/history")"
[[ $(metric 'vfhealth_suspect_total{outcome="cleared"}') == 1 ]] || fail "vfhealth_suspect_total cleared"
echo PASS
