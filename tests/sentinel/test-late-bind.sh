#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The startup grace (--control-grace), on a real mount with reconciles every
# 0.2 s, so that without it a claim whose control socket does not listen
# would be released within half a second:
#  - a late binder: placed by examples/placement/place.sh from a shell that
#    exits at once, the claim names control= and agent= of a VMM that binds
#    its control socket 3 s after the claim, and no pid.  Meanwhile the claim is kept
#    (five reconciles and more), `starting`, noted once, never dialled and
#    never counted uncertain; once its socket listens, it is polled;
#  - the grace counts from the claim, not from the sentinel's start: a claim
#    whose control socket never listens, made 200 s before (claimed_at), is
#    kept under the default grace (300 s), then released at once by a
#    restarted vfhealthd whose grace is 150 s (one counted from its own start
#    would keep it 150 s more);
#  - never forever: under a 2 s grace a never-bound claim is released, at
#    least 2 s after its claim (its history says when), and one whose
#    claimed_at is an hour to come is released too (the grace counts from
#    its first sighting then, not from that time).
source "$(dirname "$0")/lib.sh"

L=0000:41:00.1 # late binder
N=0000:41:00.2 # never binds, claimed 200 s ago
G=0000:41:00.3 # never binds, under a 2 s grace
F=0000:41:00.4 # never binds, claimed_at an hour to come
FAST=(--poll-interval 0.2 --poll-timeout 1 --reconcile-interval 0.2)

rfc3339() { date -u -d "$1" +%Y-%m-%dT%H:%M:%S.%NZ; }
reconciles() { local v; v=$(metric vfhealth_sentinel_reconciles_total); echo "${v:-0}"; }
watched_is() { [[ $(metric "vfhealth_sentinel_claims{watch=\"$1\"}") == "$2" ]]; }
# released_after VF INSTANCE: seconds from its claim to its release (history).
released_after() {
	local line claimed released
	line=$(grep " claim $2 " "$MNT/$1/history") || fail "$1: no history of $2"
	claimed=${line%% *}
	released=$(sed -n 's/.* released=\([^ ]*\) .*/\1/p' <<<"$line")
	[[ -n $released && $released != - ]] || fail "$1: $2 not released: $line"
	awk -v a="$(date -d "$claimed" +%s.%N)" -v b="$(date -d "$released" +%s.%N)" \
		'BEGIN { printf "%.3f\n", b - a }'
}

start_daemon "${FAST[@]}"
for vf in "$L" "$N" "$G" "$F"; do register_vf "$vf"; done

# The late binder is placed by examples/placement/place.sh, run by a shell
# that exits at once: the claim names what its VMM will bind, and no pid
# (not the shell's, whose death would release it as a crash).
place=${VFHEALTH_SOURCE_ROOT:?}/examples/placement/place.sh
echo "$L" >"$T/candidates"
bash -c '"$@" >"$0"' "$T/placed" "$place" --mount "$MNT" --candidates "$T/candidates" \
	--agent "hvsock:$T/late.hv:2222" --control "$T/late.ctl" vm-late ||
	fail "place.sh failed"
claimed_us=${EPOCHREALTIME//[.,]/}
[[ $(cat "$T/placed") == "$L" ]] || fail "place.sh placed: $(cat "$T/placed")"
grep -qx 'pid=' "$MNT/$L/assignments/vm-late" || fail "place.sh named a pid: $(cat "$MNT/$L/assignments/vm-late")"
claim "$N" vm-never "claimed_at=$(rfc3339 '-200 seconds')" "agent=hvsock:$T/never.hv:2222" "control=$T/never.ctl"
R0=$(reconciles)

# Without the grace both are released within two reconciles.
wait_for 10 "five reconciles" metric_ge vfhealth_sentinel_reconciles_total $((R0 + 5))
wait_for 10 "both claims counted starting" watched_is starting 2
three_seconds_on() { ((${EPOCHREALTIME//[.,]/} - claimed_us >= 3000000)); }
wait_for 3 "three seconds since the claim" three_seconds_on
[[ -f $MNT/$L/assignments/vm-late ]] || fail "the late binder was released before its VMM bound"
[[ -f $MNT/$N/assignments/vm-never ]] || fail "a claim 200 s old released under a 300 s grace"
! grep -q "vm-late .*looks dead" "$T/daemon.log" || fail "the late binder judged dead"
[[ $(grep -c "vf $L: the control socket of vm-late .* is not listening yet" "$T/daemon.log") == 1 ]] ||
	fail "the late binder not noted exactly once"
[[ $(metric vfhealth_sentinel_liveness_uncertain_total) == 0 ]] || fail "a starting VMM counted uncertain"
grep -qx "$L" "$MNT/allocatable" && fail "the late binder's VF is allocatable"

# The VMM binds: its claim is polled from then on.
start_vmm late --never-answer --connect-log "$T/late.connects"
wait_for 10 "the late binder polled" watched_is polled 1
wait_for 10 "the late binder's agent dialled" lines_at_least "$T/late.connects" 1
watched_is starting 1 || fail "starting is not the never-bound claim alone"
echo "ok   late binder: kept $(($(reconciles) - R0)) reconciles until its VMM bound, then polled"

# A restart does not renew the grace: the claim counts from its claimed_at.
stop_daemon
start_daemon "${FAST[@]}" --control-grace 150
wait_for 10 "the 200 s old claim released" test ! -e "$MNT/$N/assignments/vm-never"
grep -q "vf $N: released the claim of vm-never .*VMM dead (no socket listening on the control path)" \
	"$T/daemon.log" || fail "vm-never: release not logged"
span=$(released_after "$N" vm-never)
awk -v s="$span" 'BEGIN { exit !(s >= 150) }' || fail "vm-never released before its grace"
echo "ok   after a restart with a 150 s grace, a claim 200 s old released at once ($span s after its claimed_at)"
[[ -f $MNT/$L/assignments/vm-late ]] || fail "the late binder released after the restart"

# A grace ends: from the claim, or from its first sighting for a claimed_at to come.
stop_daemon
start_daemon "${FAST[@]}" --control-grace 2
claim "$G" vm-g "agent=hvsock:$T/g.hv:2222" "control=$T/g.ctl"
claim "$F" vm-f "claimed_at=$(rfc3339 "+1 hour")" "agent=hvsock:$T/f.hv:2222" "control=$T/f.ctl"
wait_for 10 "the never-bound claim released" test ! -e "$MNT/$G/assignments/vm-g"
wait_for 10 "the claim from the future released" test ! -e "$MNT/$F/assignments/vm-f"
span=$(released_after "$G" vm-g)
awk -v s="$span" 'BEGIN { exit !(s >= 2) }' || fail "vm-g released before its grace"
echo "ok   never bound under a 2 s grace: released $span s after its claim; claimed_at an hour ahead: released too"
grep -q "vf $G: the control socket of vm-g .* is not listening yet" "$T/daemon.log" ||
	fail "vm-g not noted as starting"
[[ -f $MNT/$L/assignments/vm-late ]] || fail "the late binder released"
[[ $(metric vfhealth_sentinel_liveness_uncertain_total) == 0 ]] || fail "counted uncertain"
stop_daemon
echo PASS
