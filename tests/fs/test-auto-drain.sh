#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What bounds a drain auto_recover began (a tenant's FAILED answers can
# start one), on a real mount with a fake sysfs and a stand-in recovery
# program that records its calls:
#   - a GPU waiting for its VMs holds back no other GPU: A, drained by the
#     policy with a live claim, waits while B's quarantines drain and cycle B;
#   - an operator's undrain of an automatic drain stands: B's next drain
#     and cycle show the policy ran on, and A, first in its order, stays
#     serving; only quarantines after the undrain drain A again;
#   - the deadline survives a restart: a drain whose stored time is older
#     than the default --auto-drain-timeout (86400 s) ends at the start;
#   - --auto-drain-timeout 2: a drain its VM keeps going ends after 2 s,
#     not before; the healthy VFs are allocatable again, the quarantined
#     stay out, the claim stays; the history, the warning, the metric; the
#     policy does not drain the GPU again for the quarantines it had (A
#     is drained and cycled meanwhile);
#   - bad --auto-drain-timeout values are refused.
source "$(dirname "$0")/lib.sh"
require_fuse
require_cmd sqlite3
mount_tmpfs "$T/db" 4m 0700

PFA=0000:41:00.0 PFB=0000:42:00.0
VFA=(0000:41:00.1 0000:41:00.2 0000:41:00.3 0000:41:00.4 0000:41:00.5 0000:41:00.6)
VFB=(0000:42:00.1 0000:42:00.2 0000:42:00.3 0000:42:00.4)
fake_sysfs "${VFA[@]}" "${VFB[@]}"
fake_virtfns "$PFA" "${VFA[@]}"
fake_virtfns "$PFB" "${VFB[@]}"

# The stand-in: records the GPU it cycles; the VF links stay as they are.
mkdir -m 0755 "$T/bin"
cat >"$T/bin/cycle" <<EOF
#!/bin/sh
echo "\$1" >>$T/calls
EOF
chmod 0755 "$T/bin/cycle"
calls() { if [[ -e $T/calls ]]; then grep -cx "$1" "$T/calls"; else echo 0; fi; }
calls_are() { [[ $(calls "$1") == "$2" ]]; }
state_is() { [[ $(cat "$MNT/gpus/$1/state") == "$2" ]]; }
wait_state() { wait_for 30 "GPU $1 $2" state_is "$1" "$2"; }
metric() { grep -F "$1" "$MNT/metrics" | awk '{print $2}'; }
drains() { grep -cE '^[^ ]+ drain ' "$MNT/gpus/$1/history"; }
allocatable() { grep -qx "$1" "$MNT/allocatable"; }
Q=0
# quarantine VF: two distinct failed assignments (the policy may cycle its
# GPU at once, clearing it: the stand-in is quick)
quarantine() {
	local i
	for i in 1 2; do
		Q=$((Q + 1))
		put "$MNT/$1/report" "failed q$Q 2026-11-29T07:00:0${i}Z NVRM: RmInitAdapter failed!"
	done
}
ns_of() { date -u -d "$1" +%s%N; } # an RFC 3339 time of the history
GA=$MNT/gpus/$PFA GB=$MNT/gpus/$PFB

# --- bad values are refused before anything runs
for bad in -1 abc 2592001 "" " 5" 1e3; do
	rc=0
	"$VFHEALTHD" -f --db "$DB" --auto-drain-timeout "$bad" "$MNT" >"$T/bad.out" 2>&1 || rc=$?
	assert_eq "$rc" 2 "exit status for --auto-drain-timeout '$bad'"
	grep -q -- "--auto-drain-timeout must be 0 or seconds up to 2592000, not '$bad'" "$T/bad.out" ||
		fail "no reason for '$bad': $(cat "$T/bad.out")"
done
[[ ! -e $DB ]] || fail "a refused start created the database"

# VFs are registered by hand here (mkdir), before and after sysfs shows them
DAEMON_ARGS+=(--register manual --recover-program "$T/bin/cycle")
start_daemon --auto-drain-timeout 0
for vf in "${VFA[@]}" "${VFB[@]}"; do mkdir "$MNT/$vf"; done
put "$MNT/auto_recover" 2

# --- A waits for its VM; B is drained and cycled meanwhile
touch "$MNT/${VFA[0]}/assignments/vm-a"
quarantine "${VFA[1]}"
quarantine "${VFA[2]}"
wait_state "$PFA" draining
assert_cat "$MNT/${VFA[2]}/quarantined" 1
assert_match "$(grep -E '^[^ ]+ drain ' "$GA/history")" "drain by=- why=auto: 2 VFs out of service by quarantine$" \
	"A's automatic drain"
quarantine "${VFB[0]}"
quarantine "${VFB[1]}"
wait_for 30 "B's automatic cycle while A waits" calls_are "$PFB" 1
wait_state "$PFB" serving
assert_cat "$GA/state" draining
assert_eq "$(calls "$PFA")" 0 "cycles of A while its VM stays"
settle_cat "$MNT/${VFB[0]}/quarantined" 0

# --- the operator's undrain stands: the policy runs on (B) and leaves A
put "$GA/drain" 0
assert_cat "$GA/state" serving
quarantine "${VFB[0]}"
quarantine "${VFB[1]}"
wait_for 30 "B's second automatic cycle" calls_are "$PFB" 2
wait_state "$PFB" serving
assert_cat "$GA/state" serving
assert_eq "$(drains "$PFA")" 1 "drains of A after the operator's undrain"
allocatable "${VFA[5]}" || fail "a healthy VF of the undrained GPU is not allocatable"
# new quarantines do drain it again, and only they count
quarantine "${VFA[3]}"
assert_cat "$MNT/${VFA[3]}/quarantined" 1
assert_cat "$GA/state" serving
quarantine "${VFA[4]}"
wait_state "$PFA" draining
assert_match "$(grep -E '^[^ ]+ drain ' "$GA/history" | tail -n 1)" \
	"drain by=- why=auto: 2 VFs out of service by quarantine$" "A's drain for the new quarantines"
! allocatable "${VFA[5]}" || fail "a VF of a draining GPU is allocatable"

# --- the deadline is the drain's stored time: a restart does not put it off
stop_daemon
old=$(date -u -d '-2 days' +%Y-%m-%dT%H:%M:%S.000000000Z)
sqlite3 "$DB" "UPDATE gpu_history SET at = '$old' WHERE id = (SELECT MAX(id) FROM gpu_history
	WHERE parent = '$PFA' AND event = 'drain')"
start_daemon # the default deadline, 86400 s
wait_state "$PFA" serving
assert_match "$(tail -n 1 "$GA/history")" \
	"undrain by=- why=auto: the drain timed out after 86400 s: a VM still uses a VF of it$" \
	"A's history after the restart"
assert_eq "$(metric "vfhealth_gpu_auto_drain_timeouts_total{parent=\"$PFA\"}")" 1 "A's timeouts"
assert_eq "$(metric "vfhealth_gpu_auto_drain_timeouts_total{parent=\"$PFB\"}")" 0 "B's timeouts"
allocatable "${VFA[5]}" || fail "a healthy VF is not allocatable after the drain's timeout"
for vf in "${VFA[@]:1:4}"; do
	assert_cat "$MNT/$vf/quarantined" 1
	! allocatable "$vf" || fail "quarantined $vf is allocatable after the drain's timeout"
done
[[ -e $MNT/${VFA[0]}/assignments/vm-a ]] || fail "the timeout ended the VM's claim"
grep -q "GPU $PFA: its automatic drain timed out after 86400 s (a VM still uses a VF of it)" \
	"$DAEMON_LOG" || fail "no warning for the timeout"

# --- --auto-drain-timeout 2: B's VM keeps its drain going; it ends after 2 s
stop_daemon
start_daemon --auto-drain-timeout 2
touch "$MNT/${VFB[2]}/assignments/vm-b"
quarantine "${VFB[0]}"
quarantine "${VFB[1]}"
wait_state "$PFB" draining
assert_cat "$MNT/${VFB[1]}/quarantined" 1
grep -q "GPU $PFB: auto_recover drains it .*, else the drain ends after 2 s" "$DAEMON_LOG" ||
	fail "the automatic drain's line does not say its deadline"
! allocatable "${VFB[3]}" || fail "a VF of a draining GPU is allocatable"
wait_state "$PFB" serving
drained_at=$(grep -E '^[^ ]+ drain ' "$GB/history" | tail -n 1 | cut -d' ' -f1)
undrained=$(tail -n 1 "$GB/history")
assert_match "$undrained" "undrain by=- why=auto: the drain timed out after 2 s: a VM still uses a VF of it$" \
	"B's history"
elapsed=$(($(ns_of "${undrained%% *}") - $(ns_of "$drained_at")))
((elapsed >= 2000000000)) || fail "the drain ended after ${elapsed} ns, before its 2 s"
assert_eq "$(metric "vfhealth_gpu_auto_drain_timeouts_total{parent=\"$PFB\"}")" 1 "B's timeouts"
allocatable "${VFB[3]}" || fail "a healthy VF is not allocatable after the drain's timeout"
! allocatable "${VFB[0]}" || fail "a quarantined VF is allocatable after the drain's timeout"
assert_eq "$(calls "$PFB")" 2 "cycles of B while its VM stayed"
grep -qE "<4>.*GPU $PFB: its automatic drain timed out after 2 s|warning.*GPU $PFB: its automatic drain timed out" \
	"$DAEMON_LOG" || fail "the timeout is not logged at warning: $(grep "GPU $PFB: its automatic" "$DAEMON_LOG")"
# the policy runs on (A's new quarantine, then A's cycle once its VM
# left) and leaves B serving
quarantine "${VFA[5]}" # A counts 1 since its undrain: below auto_recover
assert_cat "$GA/state" serving
put "$MNT/auto_recover" 1
wait_state "$PFA" draining
rm "$MNT/${VFA[0]}/assignments/vm-a"
wait_for 30 "A's automatic cycle once its VM left" calls_are "$PFA" 1
wait_state "$PFA" serving
assert_cat "$GB/state" serving
assert_eq "$(drains "$PFB")" 3 "drains of B after its timeout"

check_sanitizers
stop_daemon
echo "ok"
