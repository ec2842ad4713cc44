#!/usr/bin/env bash
# demo-next-steps.sh - every command the demo prints under "What to try next"
# works as printed.  The demo runs (without --once, so its mount stays) on a
# mountpoint of our own; the block is taken from its output exactly as an
# operator reads it, and each line is run in order, through bash, against the
# demo's final state: exit status 0, nothing on stderr, and the output or
# state change the line promises.  A line this test does not know fails it,
# so a new suggestion comes with its check.  Stopping the demo (SIGTERM)
# must leave no mount and no process behind.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse
require_cmd inotifywait:inotify-tools python3
demo=$source_root/examples/demo.sh
[[ -x $demo ]] || fail "$demo is missing or not executable"
# The programs under test, from meson (the demo takes them from these too).
: "${VFHEALTHD:?run under meson test}" "${VFHEALTH_AGENT:?}" "${TEST_VMM:?}"

mnt=$T/mnt
work=$T/demo
out=$T/demo.out
demo_pid=
stop_demo() {
	[[ -n $demo_pid ]] || return 0
	kill -TERM "$demo_pid" 2>/dev/null || true
	wait "$demo_pid" 2>/dev/null || true
	demo_pid=
}
on_exit stop_demo
on_exit "detach_mounts_under '$work'"

# setsid: the demo and its children are one process group we can reap.
setsid "$demo" --mount "$mnt" --workdir "$work" >"$out" 2>&1 &
demo_pid=$!
wait_demo_ready "$out" "$demo_pid"
grep -qxF "==> Mounting vfhealthd on $mnt (database $work/vfhealth.db)" "$out" ||
	fail "the demo did not mount where --mount said"

# The block as printed: from its heading to the Logs line, indent removed.
mapfile -t block < <(awk '/^What to try next/ { on = 1; next } /^Logs: / { on = 0 } on' "$out" |
	sed 's/^  //')
cmds=()
for line in "${block[@]}"; do
	[[ -z $line || $line == '#'* ]] || cmds+=("$line")
done
((${#cmds[@]} >= 8)) || { printf '%s\n' "${block[@]}" >&2; fail "only ${#cmds[@]} commands in the block"; }

wedged=0000:41:00.6
spare=0000:41:01.0
q() { cat "$mnt/quarantined"; }

# A watcher runs until interrupted: its first line must be the current set.
run_watcher() {
	local cmd=$1 log want
	log=$(mktemp "$T/watch.XXXXXX")
	want="quarantined $(q | tr '\n' ' ' | sed 's/ $//')"
	setsid bash -c "$cmd" >"$log" 2>&1 &
	local pid=$!
	on_exit "kill -- -$pid 2>/dev/null"
	wait_for 20 "'$want' from: $cmd" grep -qxF -- "$want" "$log"
	kill -0 "$pid" 2>/dev/null || fail "the watcher exited: $cmd: $(cat "$log")"
	kill -TERM -- "-$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

n=0
for cmd in "${cmds[@]}"; do
	n=$((n + 1))
	if [[ $cmd == *"until Ctrl-C"* ]]; then
		run_watcher "$cmd"
		echo "ok $n: $cmd"
		continue
	fi
	rc=0
	timeout 30 bash -c "$cmd" >"$T/cmd.out" 2>"$T/cmd.err" || rc=$?
	res=$(<"$T/cmd.out")
	[[ $rc == 0 ]] || fail "exit $rc: $cmd: $(cat "$T/cmd.err")"
	[[ ! -s $T/cmd.err ]] || fail "stderr from: $cmd: $(cat "$T/cmd.err")"
	# What each suggestion promises, checked on its output or on the mount.
	case $cmd in
	"ls $mnt $mnt/$wedged")
		[[ $res == *"$spare"* && $res == *tally* && $res == *assignments* ]] ||
			fail "ls shows: $res" ;;
	"cat $mnt/quarantined $mnt/resources $mnt/status")
		# allocatable: the spare VF, the suspect one (vm-f's VMM was killed) and the recovered GPU's two
		[[ $res == "$wedged"$'\n'*"allocatable_slots 4"*$'\n'ok ]] || fail "cat shows: $res" ;;
	"touch $work/vm-d.gpu-ok")
		[[ -e $work/vm-d.gpu-ok ]] || fail "no $work/vm-d.gpu-ok" ;;
	"until "*"$mnt/quarantined"*"cat $mnt/$wedged/tally")
		# The success of vm-d's assignment lifted the quarantine and
		# cleared both failures.
		[[ $res == 0 && -z $(q) ]] || fail "after vm-d's success: tally '$res', quarantined '$(q)'" ;;
	"echo 1 > $mnt/0000:41:00.5/quarantined; cat $mnt/quarantined")
		[[ $res == 0000:41:00.5 ]] || fail "operator quarantine: quarantined is '$res'" ;;
	"echo 0 > $mnt/0000:41:00.5/quarantined")
		[[ -z $(q) ]] || fail "the runbook's clear left '$(q)'" ;;
	"MOUNT=$mnt $source_root/examples/vmm/vfhealth-claim.sh claim $spare my-vm")
		[[ $res == claimed_at=* && -e $mnt/$spare/assignments/my-vm ]] || fail "claim printed: $res" ;;
	"MOUNT=$mnt $source_root/examples/vmm/vfhealth-claim.sh release $spare my-vm")
		[[ ! -e $mnt/$spare/assignments/my-vm ]] || fail "release left the claim" ;;
	"grep ^vfhealth_ $mnt/metrics")
		grep -qx 'vfhealth_vfs 8' <<<"$res" || fail "metrics: $res" ;;
	*)
		fail "the demo suggests a command this test does not check: $cmd" ;;
	esac
	echo "ok $n: $cmd"
done

# The demo stops cleanly on SIGTERM: no mount, no process of its own left.
kill -TERM "$demo_pid"
rc=0
wait "$demo_pid" || rc=$?
demo_pid=
[[ $rc == 143 ]] || fail "the demo exited $rc on SIGTERM, want 143"
! is_mounted "$mnt" || fail "the demo left $mnt mounted"
left=$(pgrep -f -- "$work/" || true)
[[ -z $left ]] || fail "the demo left processes: $left"
echo "demo-next-steps OK (${#cmds[@]} commands)"
