#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A parent GPU's SR-IOV cycle on a real mount, with a fake sysfs (virtfn and
# physfn links) and a stand-in recovery program that records its calls and
# removes and recreates the VF links, fails, hangs or stops at a gate on
# demand:
#   - without --recover-program, `recover` and auto_recover refuse;
#   - a cycle needs a drained GPU (EBUSY while it serves or drains); a
#     claim racing the cycle, an undrain and a second cycle get EBUSY;
#   - success: the program gets PF and its VFs, every VF is back in sysfs,
#     their failures and quarantine are cleared (an operator hold stays),
#     the GPU serves, the history and metrics say so;
#   - the VF the cycle cleared is on probation (state, history, metric),
#     ranks after the clean VFs, and one failed assignment quarantines it;
#   - program failure, timeout (the program and its child are killed and
#     reaped), a VF that does not come back: failed, the VFs stay out, a
#     drain leaves it failed, an undrain serves;
#   - vfhealthd stopped mid-cycle: the program is killed, the restart makes
#     the GPU failed (interrupted) and does not run the program again;
#   - a program whose path walks what uid 65534 owns is refused at start;
#     the file renamed over the program after the start is not what runs;
#   - vfhealthd SIGKILLed mid-cycle: the program and a setsid'd grandchild
#     end with it, after the program's TERM trap ran; a restart serves only
#     once processes of that cycle that ignore SIGTERM are gone, and while
#     one stuck in the kernel lives, refuses every cycle;
#   - observe mode runs nothing; one GPU recovers at a time;
#   - auto_recover drains a GPU with enough quarantined VFs, waits for its
#     VMs to leave, cycles it, and never retries a failed cycle;
#   - docs/interface.md's drain and cycle examples work as printed (dash).
source "$(dirname "$0")/lib.sh"
require_fuse
mount_tmpfs "$T/db" 4m 0700
EOPNOTSUPP="Operation not supported"

PFA=0000:41:00.0 PFB=0000:42:00.0
VFA=(0000:41:00.1 0000:41:00.2 0000:41:00.3)
VFB=(0000:42:00.1)
fake_sysfs "${VFA[@]}" "${VFB[@]}"
fake_virtfns "$PFA" "${VFA[@]}"
fake_virtfns "$PFB" "${VFB[@]}"
# VFs are registered by hand here (mkdir), before and after sysfs shows them
DAEMON_ARGS+=(--register manual)

# The stand-in: $T/mode says what it does (ok, fail, hang, missing, gate).
mkdir -m 0755 "$T/bin"
cat >"$T/bin/cycle" <<EOF
#!/bin/bash
T=$T
EOF
cat >>"$T/bin/cycle" <<'EOF'
set -u
pf=$1
dev=$VFHEALTH_SYSFS_ROOT/bus/pci/devices/$pf
mode=$(cat "$T/mode") # before the call is recorded: a test waits for that
# its pid as the test sees it ($$ is its PID namespace's): /proc is the host's
read -r pid _ </proc/self/stat
echo "$pid $pf numvfs=$VFHEALTH_NUMVFS vfs=$VFHEALTH_VFS path=$PATH" >>"$T/calls"
echo "cycling $pf"
case $mode in
fail) echo "sriov-manage -e $pf failed" >&2; exit 3 ;;
hang)
	trap '' TERM
	sh -c 'read -r pid _ </proc/self/stat; echo "$pid" >"$1"; exec sleep 1000' sh "$T/hang-child" &
	wait
	exit 0 ;;
gate) read -r _ <"$T/gate" ;;
orphan | stubborn)
	# as sriov-cycle.sh: stop a service, start it again when terminated
	echo stopped >"$T/service"
	if [[ $mode == orphan ]]; then
		trap 'echo started >"$T/service"; exit 143' TERM
	else
		trap '' TERM # and so its children, as they inherit that
	fi
	# a grandchild that left the process group and the session
	setsid sh -c 'read -r pid _ </proc/self/stat; echo "$pid" >"$1/orphan"
		while :; do echo beat >>"$1/heartbeat"; sleep 0.1; done' sh "$T" &
	sleep 1000 &
	wait "$!"
	exit 1 ;;
stuck)
	# a grandchild stuck in the kernel: its write waits for a commit that
	# another vfhealthd holds (FUSE: once the request was read, even
	# SIGKILL waits for the answer)
	setsid sh -c 'read -r pid _ </proc/self/stat; echo "$pid" >"$1/orphan"
		echo 1 >"$1/mntB/0000:99:00.1/quarantined"' sh "$T" &
	sleep 1000 &
	wait "$!"
	exit 1 ;;
esac
vfs=()
for l in "$dev"/virtfn*; do vfs+=("$(basename "$(readlink "$l")")"); done
rm -f "$dev"/virtfn*
[[ $mode == missing ]] && unset 'vfs[-1]'
i=0
for vf in "${vfs[@]}"; do ln -s "../$vf" "$dev/virtfn$i"; i=$((i + 1)); done
echo "done $pf"
EOF
chmod 0755 "$T/bin/cycle"
echo ok >"$T/mode"
mkfifo "$T/gate"
calls() { if [[ -e $T/calls ]]; then wc -l <"$T/calls"; else echo 0; fi; }
calls_above() { (($(calls) > $1)); }
# open_gate: let a program waiting at the gate go on (it is there: its call
# is recorded after it read its mode)
open_gate() { timeout 20 sh -c 'echo go >"$1"' sh "$T/gate" || fail "no program at the gate"; }
state_is() { [[ $(cat "$MNT/gpus/$1/state") == "$2" ]]; }
wait_state() { wait_for 20 "GPU $1 $2" state_is "$1" "$2"; }
metric() { grep -F "$1" "$MNT/metrics" | awk '{print $2}'; }
quarantine() { # quarantine VF: two distinct failed assignments
	put "$MNT/$1/report" "failed q1-${1//[:.]/-} 2026-11-29T07:00:00Z NVRM: RmInitAdapter failed!"
	put "$MNT/$1/report" "failed q2-${1//[:.]/-} 2026-11-29T07:01:00Z NVRM: RmInitAdapter failed!"
	assert_cat "$MNT/$1/quarantined" 1
}
GA=$MNT/gpus/$PFA GB=$MNT/gpus/$PFB

# --- without a program nothing is ever run
start_daemon
for vf in "${VFA[@]}" "${VFB[@]}"; do mkdir "$MNT/$vf"; done
assert_eq "$(ls "$GA" | tr '\n' ' ')" "drain history recover state vfs " "a GPU's files"
assert_eq "$(stat -c %a "$GA/recover")" 664 "mode of recover"
assert_cat "$MNT/auto_recover" off
put "$GA/drain" 1
expect_err "$EOPNOTSUPP" put "$GA/recover" cycle
expect_err "$EOPNOTSUPP" put "$MNT/auto_recover" 2
assert_cat "$MNT/auto_recover" off
assert_cat "$GA/state" drained
grep -q "without --recover-program" "$DAEMON_LOG" || fail "the refusal is not said in the log"
put "$GA/drain" 0
stop_daemon
# a program others may change is refused at start
cp "$T/bin/cycle" "$T/bin/cycle-open"
chmod 0757 "$T/bin/cycle-open"
# refused_start PROGRAM: vfhealthd refuses it, exit 2 (one that started
# anyway is stopped by timeout, and fails the test)
refused_start() {
	local rc=0
	timeout 20 "$VFHEALTHD" -f --db "$DB" --recover-program "$1" "$MNT" >"$T/open.out" 2>&1 || rc=$?
	((rc == 2)) || fail "vfhealthd did not refuse --recover-program $1 (exit $rc): $(cat "$T/open.out")"
}
refused_start "$T/bin/cycle-open"
grep -q "writable by another user" "$T/open.out" || fail "no reason given: $(cat "$T/open.out")"
# a program whose path walks what another user owns is refused at start:
# the attacker (uid 65534) owns a directory and points a link in it at the
# program (she could re-point it later), or at her own script
mkdir -m 0755 "$T/evil"
chown 65534:65534 "$T/evil"
as_user 65534 ln -s "$T/bin/cycle" "$T/evil/cycle"
ln -s "$T/evil/cycle" "$T/bin/via-evil" # root's link, into her directory
for prog in "$T/evil/cycle" "$T/bin/via-evil"; do
	refused_start "$prog"
	grep -qF "refused: $T/evil is owned by uid 65534" "$T/open.out" ||
		fail "no clear reason for $prog: $(cat "$T/open.out")"
done

# A deadline a busy machine (or ThreadSanitizer's daemon) never reaches by
# accident; the hang below waits it out once.
DAEMON_ARGS+=(--recover-program "$T/bin/cycle" --recover-timeout 20)
start_daemon

# --- bad input and rights change nothing; a serving GPU is not cycled
expect_err "$EINVAL" put "$GA/recover" reset
expect_err "$EINVAL" put "$GA/recover" ""
expect_err "$EACCES" as_user 65534 sh -c "echo cycle > $GA/recover"
expect_err "$EBUSY" put "$GA/recover" cycle
assert_cat "$GA/state" serving
for bad in on -1 257 "2 "; do expect_err "$EINVAL" put "$MNT/auto_recover" "$bad"; done
assert_eq "$(calls)" 0 "program calls"

# --- success: drain with a live claim, the cycle waits for it
quarantine "${VFA[1]}"
put "$MNT/${VFA[2]}/quarantined" 1 # an operator hold: the cycle keeps it
touch "$MNT/${VFA[0]}/assignments/vm-live"
put "$GA/drain" 1
assert_cat "$GA/state" draining
expect_err "$EBUSY" put "$GA/recover" cycle
rm "$MNT/${VFA[0]}/assignments/vm-live"
assert_cat "$GA/state" drained
echo gate >"$T/mode"
# what the write started, read back through the same descriptor
assert_eq "$("$VFTOOL" write-read "$GA/recover" cycle)" recovering "recover's outcome"
assert_cat "$GA/state" recovering
wait_for 10 "the program to start" calls_above 0
# a claim racing the cycle, an undrain, a second cycle: refused
expect_err "$EBUSY" touch "$MNT/${VFA[0]}/assignments/vm-race"
[[ ! -e $MNT/${VFA[0]}/assignments/vm-race ]] || fail "a claim during a cycle exists"
expect_err "$EBUSY" put "$GA/drain" 0
expect_err "$EBUSY" put "$GA/recover" cycle
expect_err "$EBUSY" rmdir "$MNT/${VFA[0]}" # the cycle will check it is back
! grep -qx "${VFA[0]}" "$MNT/allocatable" || fail "a VF of a recovering GPU is allocatable"
assert_cat "$GA/drain" 1
echo ok >"$T/mode"
open_gate
wait_state "$PFA" serving
call=$(cat "$T/calls")
assert_match "$call" "^[0-9]+ $PFA numvfs=3 vfs=${VFA[*]} path=/usr/local/sbin:[^ ]*$" \
	"the program's argument and environment"
settle_cat "$MNT/${VFA[1]}/quarantined" 0
assert_cat "$MNT/${VFA[1]}/tally" 0
assert_cat "$MNT/${VFA[2]}/quarantined" 1
grep -qx "${VFA[1]}" "$MNT/allocatable" || fail "a recovered VF is not allocatable"
touch "$MNT/${VFA[0]}/assignments/vm-after" && rm "$MNT/${VFA[0]}/assignments/vm-after"
history=$(cat "$GA/history")
assert_match "$history" " drain by=0
[^ ]+ undrain by=0
[^ ]+ drain by=0
[^ ]+ recover by=0
[^ ]+ recovered by=- why=took [0-9.]+ s$" "history after a cycle"
assert_match "$(cat "$MNT/${VFA[1]}/history")" " why=recovered by=" "the VF's history"
assert_eq "$(metric "vfhealth_gpu_recoveries_total{parent=\"$PFA\",outcome=\"success\"}")" 1 "success counter"
assert_match "$(metric "vfhealth_gpu_recovery_duration_seconds{parent=\"$PFA\"}")" '^[0-9]+\.[0-9]+$' "duration"
grep -q "GPU $PFA: .*cycle: cycling $PFA" "$DAEMON_LOG" || fail "the program's output is not logged"
grep -q "GPU $PFA: recovered" "$DAEMON_LOG" || fail "no recovered line"

# --- the VF the cycle cleared is on probation until its first OK: ranked
# after every clean VF (with the suspect ones), and its first failed
# assignment quarantines it although the threshold is 2
assert_cat "$MNT/threshold" 2
assert_cat "$MNT/${VFA[1]}/state" probation
assert_cat "$MNT/${VFA[0]}/state" ok
assert_cat "$MNT/${VFA[2]}/state" held # not cleared by the cycle
assert_eq "$(awk '$1 == "vfhealth_probation_vfs" {print $2}' "$MNT/metrics")" 1 "VFs on probation"
assert_match "$(cat "$MNT/${VFA[1]}/history")" " probation cleared=- why=-$" "history on probation"
grep -q "GPU $PFA: recovered: .* on probation after the GPU's cycle" "$DAEMON_LOG" ||
	fail "the recovered line does not say the VFs are on probation"
# equals are drawn afresh for each open: without its rank, the probation
# VF would come before its clean sibling about half the time
for _ in 1 2 3 4 5 6 7 8; do
	assert_eq "$(tail -n 1 "$MNT/allocatable")" "${VFA[1]}" "the VF on probation ranks last"
done
put "$MNT/${VFA[1]}/report" "failed p1 2026-11-29T08:00:00Z NVRM: RmInitAdapter failed!"
assert_cat "$MNT/${VFA[1]}/quarantined" 1
assert_cat "$MNT/${VFA[1]}/tally" 1
assert_cat "$MNT/${VFA[1]}/state" quarantined
assert_eq "$(awk '$1 == "vfhealth_probation_vfs" {print $2}' "$MNT/metrics")" 0 "VFs on probation after the failure"
assert_match "$(cat "$MNT/${VFA[1]}/history")" " probation cleared=[^ ]+ why=quarantined
" \
	"history after failing on probation"
grep -q "${VFA[1]}: quarantined: failed on probation" "$DAEMON_LOG" || fail "no line for it"

# --- failure, timeout, a VF missing: failed, the VFs stay out
cycle_fails() { # cycle_fails MODE OUTCOME WHY-REGEX
	echo "$1" >"$T/mode"
	put "$GA/drain" 1
	put "$GA/recover" cycle
	wait_state "$PFA" failed
	assert_match "$(tail -n 1 "$GA/history")" "recover-failed by=- why=$3" "history of $1"
	assert_eq "$(metric "vfhealth_gpu_recoveries_total{parent=\"$PFA\",outcome=\"$2\"}")" 1 "$2 counter"
	! grep -qx "${VFA[1]}" "$MNT/allocatable" || fail "a VF of a failed GPU is allocatable"
	expect_err "$EBUSY" touch "$MNT/${VFA[1]}/assignments/vm-x"
	put "$GA/drain" 1 # leaves it failed
	assert_cat "$GA/state" failed
	put "$GA/drain" 0
	assert_cat "$GA/state" serving
}
quarantine "${VFA[1]}"
cycle_fails fail failed "exit 3: sriov-manage -e $PFA failed"
assert_cat "$MNT/${VFA[1]}/quarantined" 1
cycle_fails hang timeout "timed out after 20 s: killed"
hang_child=$(cat "$T/hang-child")
# the group's SIGKILL is delivered asynchronously
wait_for 10 "the timed-out program's child $hang_child to die" process_gone "$hang_child"
hang_pid=$(tail -n 1 "$T/calls" | cut -d' ' -f1)
wait_for 10 "the timed-out program $hang_pid to die" process_gone "$hang_pid"
cycle_fails missing vf_missing "VF ${VFA[2]} did not come back \(1 of 3 missing\)"
fake_virtfns "$PFA" "${VFA[@]}"
grep -q "recovery failed (timeout)" "$DAEMON_LOG" || fail "no failure line"

# --- observe mode runs nothing
put "$MNT/mode" observe
put "$GA/drain" 1
n=$(calls)
expect_err "$EPERM" put "$GA/recover" cycle
assert_cat "$GA/state" drained
assert_eq "$(calls)" "$n" "program calls in observe mode"
grep -q "observe mode: a cycle asked by uid 0 would run $T/bin/cycle" "$DAEMON_LOG" ||
	fail "observe mode did not log what it would run"
put "$MNT/mode" enforce

# --- one GPU at a time
put "$GB/drain" 1
echo gate >"$T/mode"
n=$(calls)
put "$GA/recover" cycle
expect_err "$EBUSY" put "$GB/recover" cycle
wait_for 10 "the program to start" calls_above "$n"
echo ok >"$T/mode"
open_gate
wait_state "$PFA" serving
put "$GB/recover" cycle
wait_state "$PFB" serving

# --- vfhealthd stopped mid-cycle: killed, then failed, never re-run
put "$GA/drain" 1
echo gate >"$T/mode"
n=$(calls)
put "$GA/recover" cycle
wait_for 10 "the program to start" calls_above "$n"
gate_pid=$(tail -n 1 "$T/calls" | cut -d' ' -f1)
stop_daemon
wait_for 10 "the program to die with vfhealthd" process_gone "$gate_pid"
echo ok >"$T/mode"
start_daemon
wait_state "$PFA" failed
assert_match "$(tail -n 1 "$GA/history")" "recover-failed by=- why=interrupted" "history after a restart"
assert_eq "$(metric "vfhealth_gpu_recoveries_total{parent=\"$PFA\",outcome=\"interrupted\"}")" 1 "interrupted counter"
assert_eq "$(calls)" "$((n + 1))" "program calls after a restart"
put "$GA/drain" 0

# --- auto_recover: drain once 2 VFs are quarantined, cycle once drained.
# Only quarantines that began after the GPU's last cycle began count.
put "$MNT/${VFA[1]}/quarantined" 0
put "$MNT/${VFA[2]}/quarantined" 0 # lift the hold: a claim keeps the GPU draining
put "$MNT/auto_recover" 2
assert_cat "$MNT/auto_recover" 2
touch "$MNT/${VFA[2]}/assignments/vm-busy"
n=$(calls)
quarantine "${VFA[0]}"
assert_cat "$GA/state" serving
quarantine "${VFA[1]}"
wait_state "$PFA" draining
assert_match "$(grep ' drain ' "$GA/history" | tail -n 1)" "drain by=- why=auto: 2 VFs out of service by quarantine" "an automatic drain"
assert_eq "$(calls)" "$n" "a cycle while a VM holds a VF"
rm "$MNT/${VFA[2]}/assignments/vm-busy"
wait_state "$PFA" serving
assert_eq "$(calls)" "$((n + 1))" "the automatic cycle"
settle_cat "$MNT/${VFA[0]}/quarantined" 0
settle_cat "$MNT/${VFA[1]}/quarantined" 0
grep -q "auto_recover drains it" "$DAEMON_LOG" || fail "no automatic drain line"

# --- an automatic cycle that fails is never retried
echo fail >"$T/mode"
quarantine "${VFA[0]}"
quarantine "${VFA[1]}"
wait_state "$PFA" failed
put "$GA/drain" 0 # the operator returns it to service; its quarantines stay
n=$(calls)
put "$MNT/auto_recover" 1
quarantine "${VFB[0]}" # makes the other GPU the policy's: it comes after PFA
wait_state "$PFB" failed
assert_cat "$GA/state" serving
assert_eq "$(calls)" "$((n + 1))" "calls: the other GPU only"
# --- docs/interface.md's drain and cycle, as printed (dash), on this mount
put "$GA/drain" 0
echo ok >"$T/mode"
command -v inotifywait >/dev/null || fail "inotifywait (inotify-tools) is missing"
blocks=$(sed -n '/^## Per GPU/,/^## /p' "$VFHEALTH_SOURCE_ROOT/docs/interface.md" |
	awk -v dir="$T" '/^```sh$/ { on = 1; n++; next } /^```/ { on = 0 } on { print > (dir "/block" n) }' &&
	ls "$T"/block*)
assert_eq "$(wc -l <<<"$blocks")" 2 "shell blocks in interface.md's Per GPU section"
touch "$MNT/${VFA[2]}/assignments/vm-docs" # in service: its hold was lifted above
sed "s|/run/vfhealth|$MNT|g" "$T/block1" >"$T/drain.sh"
background dash "$T/drain.sh"
wait_state "$PFA" draining
rm "$MNT/${VFA[2]}/assignments/vm-docs" # the VM leaves: the example returns
wait_for 10 "the drain example to return" process_gone "${BG_PIDS[-1]}"
assert_cat "$GA/state" drained
assert_eq "$(sed "s|/run/vfhealth|$MNT|g" "$T/block2" | dash)" serving "the cycle example's output"

# --- a cycle dies with vfhealthd: its program and a grandchild that left
# its process group and session end when vfhealthd is SIGKILLed, and the
# program's TERM trap runs first (the service it stopped is started again)
put "$GA/drain" 1
echo orphan >"$T/mode"
rm -f "$T/orphan" "$T/heartbeat" "$T/service"
n=$(calls)
put "$GA/recover" cycle
wait_for 10 "the program to start" calls_above "$n"
wait_for 10 "the grandchild's heartbeat" test -s "$T/heartbeat"
orphan=$(cat "$T/orphan") prog=$(tail -n 1 "$T/calls" | cut -d' ' -f1)
process_running "$orphan" || fail "no grandchild $orphan"
kill_daemon
wait_for 10 "the grandchild $orphan to die with vfhealthd" process_gone "$orphan"
wait_for 10 "the program $prog to die with vfhealthd" process_gone "$prog"
assert_cat "$T/service" started
start_daemon
wait_state "$PFA" failed
assert_match "$(tail -n 1 "$GA/history")" "recover-failed by=- why=interrupted" "history after vfhealthd was killed"
assert_eq "$(calls)" "$((n + 1))" "program calls after vfhealthd was killed"

# A cycle whose processes ignore SIGTERM ends at the grace (10 s); a vfhealthd started at once waits for them to end
# before it serves: no second cycle can meet them.
echo stubborn >"$T/mode"
rm -f "$T/orphan" "$T/heartbeat"
put "$GA/recover" cycle
wait_for 10 "the program to start" calls_above "$((n + 1))"
wait_for 10 "the grandchild's heartbeat" test -s "$T/heartbeat"
orphan=$(cat "$T/orphan")
kill_daemon
process_running "$orphan" || fail "the grandchild $orphan ignoring SIGTERM is already gone"
start_daemon
process_gone "$orphan" || fail "vfhealthd serves while the last cycle's grandchild $orphan lives"
grep -q "processes of the last cycle (init pid [0-9]*) still run" "$DAEMON_LOG" ||
	fail "the start did not say it waited for the last cycle"
grep -q "processes of the last cycle (init pid [0-9]*) have ended" "$DAEMON_LOG" ||
	fail "the start did not say the last cycle ended"
wait_state "$PFA" failed
echo ok >"$T/mode"
put "$GA/recover" cycle
wait_state "$PFA" serving
assert_eq "$(calls)" "$((n + 3))" "program calls: one cycle after the restart"

# A process of the cycle stuck in the kernel outlives even SIGKILL: the
# start waits for it (the grace, then SIGKILL) and serves, but refuses
# every cycle while it lives; once it ends, a cycle runs.
: "${STALLSYNC:?STALLSYNC must name libstallsync.so (set by meson)}"
mkfifo "$T/stall"
exec 9<>"$T/stall"
env LD_PRELOAD="$STALLSYNC" VFHEALTH_STALL_DIR="$T/dbB/" VFHEALTH_STALL_FIFO="$T/stall.on" \
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
	"$VFHEALTHD" -f --db "$T/dbB/vfhealth.db" --no-sentinel --no-reconcile --sysfs-root "$T/sys" \
	"$T/mntB" >"$T/b.log" 2>&1 &
B_PID=$!
BG_PIDS+=("$B_PID")
wait_for 30 "the second vfhealthd to serve" test -e "$T/mntB/status"
mkdir "$T/mntB/0000:99:00.1"
ln "$T/stall" "$T/stall.on" # from now on its commits wait at the FIFO
held() { ls -l "/proc/$B_PID/fd" 2>/dev/null | grep -q -- "-> $T/stall"; }
put "$GA/drain" 1
echo stuck >"$T/mode"
rm -f "$T/orphan"
n=$(calls)
put "$GA/recover" cycle
wait_for 10 "the program to start" calls_above "$n"
wait_for 20 "the grandchild's write to be held" held
orphan=$(cat "$T/orphan")
kill_daemon
start_daemon
process_running "$orphan" || fail "the stuck grandchild $orphan is gone: nothing was tested"
grep -q "processes of the last cycle (init pid [0-9]*) do not end" "$DAEMON_LOG" ||
	fail "the start did not say the last cycle's processes do not end"
wait_state "$PFA" failed
echo ok >"$T/mode"
expect_err "$EBUSY" put "$GA/recover" cycle
assert_eq "$(calls)" "$((n + 1))" "program calls while the last cycle's processes live"
rm "$T/stall.on"
printf x >&9 # the commit goes on: the write returns, its SIGKILL ends it
exec 9>&-
wait_for 10 "the stuck grandchild $orphan to end" process_gone "$orphan"
cycle_accepted() { put "$GA/recover" cycle 2>/dev/null; }
wait_for 10 "a cycle to be accepted once the last one's processes ended" cycle_accepted
wait_state "$PFA" serving
assert_eq "$(calls)" "$((n + 2))" "program calls after the last cycle's processes ended"
kill "$B_PID"
wait_for 30 "the second vfhealthd to stop" process_gone "$B_PID"

# --- the program checked is the program run: replacing the file at its
# path (a rename, as an update would) after the start changes nothing
ln "$T/bin/cycle" "$T/bin/cycle.orig"
printf '#!/bin/bash\necho swapped >"%s/swapped"\n' "$T" >"$T/bin/cycle.new"
chmod 0755 "$T/bin/cycle.new"
mv "$T/bin/cycle.new" "$T/bin/cycle"
n=$(calls)
put "$GA/drain" 1
put "$GA/recover" cycle
wait_state "$PFA" serving
assert_eq "$(calls)" "$((n + 1))" "calls of the checked program after the swap"
[[ ! -e $T/swapped ]] || fail "vfhealthd ran the program put at the path after its start"
mv "$T/bin/cycle.orig" "$T/bin/cycle"

check_sanitizers
stop_daemon
echo "ok"
