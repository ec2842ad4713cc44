#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# slurm-check.sh - examples/slurm/vfhealth-slurm-check.sh against a live
# mount, with a stand-in scontrol on PATH that records its arguments and
# answers `scontrol show node` as Slurm does (State= and Reason= with its
# [user@time] suffix, kept across calls): a fit node is left alone; every
# VF out of service, an unavailable store, a missing or dead mount drain it
# with a reason prefixed "vfhealth:" (once, not again while drained so);
# a fit node drained with that prefix is resumed; a drain by an operator or
# by NHC is never resumed nor overwritten; observe mode drains nothing; a
# failing scontrol exits 2.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse

check=$source_root/examples/slurm/vfhealth-slurm-check.sh
mkdir -p "$T/bin"
node=$T/node   # the node as the stand-in Slurm keeps it: "STATE|REASON"
calls=$T/scontrol.calls
cat >"$T/bin/scontrol" <<'EOF'
#!/usr/bin/env bash
# The stand-in scontrol: one line of arguments per call (each quoted), and
# the node's state kept in $SCONTROL_NODE.
set -euo pipefail
printf '%q ' "$@" | sed 's/ $//' >>"$SCONTROL_CALLS"
echo >>"$SCONTROL_CALLS"
[[ -z ${SCONTROL_FAIL:-} ]] || { echo "slurm_load_node: Unable to contact slurm controller" >&2; exit 1; }
IFS='|' read -r state reason <"$SCONTROL_NODE"
case "$1 $2" in
"show node")
	echo "NodeName=$3 Arch=x86_64 CoresPerSocket=8"
	echo "   CPUAlloc=0 CPUEfctv=16 CPUTot=16 CPULoad=0.10"
	echo "   State=$state ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A"
	[[ -z $reason ]] || echo "   Reason=$reason [root@2026-12-03T07:00:00]"
	echo "   Comment=(null) Extra=(null)"
	;;
esac
if [[ $1 == update ]]; then
	shift
	for a in "$@"; do
		case $a in
		State=DRAIN) state=IDLE+DRAIN ;;
		State=RESUME) state=IDLE; reason= ;;
		Reason=*) reason=${a#Reason=} ;;
		esac
	done
	echo "$state|$reason" >"$SCONTROL_NODE"
fi
EOF
chmod +x "$T/bin/scontrol"
export PATH=$T/bin:$PATH SCONTROL_NODE=$node SCONTROL_CALLS=$calls VFHEALTH_SLURM_NODE=gpu07

# run_check: the check; its status in rc, stdout+stderr in out, the
# scontrol calls it made (beyond show node) in updates.
run_check() {
	: >"$calls"
	rc=0
	out=$(VFHEALTH_MOUNT=${CHECK_MOUNT:-$MNT} "$check" 2>&1) || rc=$?
	updates=$(grep -v '^show node gpu07$' "$calls" || true)
	grep -qx 'show node gpu07' "$calls" || fail "the check did not ask Slurm for the node: $(cat "$calls")"
}
expect() { # RC UPDATES WHAT
	run_check
	[[ $rc == "$1" ]] || fail "$3: exit $rc, want $1: $out"
	[[ $updates == "$2" ]] || fail "$3: scontrol calls '$updates', want '$2' (said: $out)"
}
set_node() { echo "$1|${2:-}" >"$node"; }
node_is() { [[ $(cat "$node") == "$1" ]] || fail "node is '$(cat "$node")', want '$1'"; }

mount_tmpfs "$T/db" 2m 0700
start_daemon --no-sentinel
mkdir "$MNT/0000:41:00.4" "$MNT/0000:41:00.5"
set_node IDLE

expect 0 "" "a fit node"
echo 1 >"$MNT/0000:41:00.4/quarantined"
expect 0 "" "one VF of two out of service"

echo 1 >"$MNT/0000:41:00.5/quarantined"
expect 1 'update NodeName=gpu07 State=DRAIN Reason=vfhealth:\ all\ 2\ VFs\ out\ of\ service' "every VF out of service"
node_is "IDLE+DRAIN|vfhealth: all 2 VFs out of service"
expect 1 "" "still unfit, drained already"

echo observe >"$MNT/mode"
set_node IDLE
expect 0 "" "observe mode"
grep -q "observe mode: enforcing would drain gpu07: all 2 VFs out of service" <<<"$out" ||
	fail "observe mode did not say what it would do: $out"
echo enforce >"$MNT/mode"
set_node "MIXED+DRAIN" "vfhealth: all 2 VFs out of service"

echo 0 >"$MNT/0000:41:00.5/quarantined"
expect 0 'update NodeName=gpu07 State=RESUME' "a VF back in service"
node_is "IDLE|"
expect 0 "" "fit, not drained"

# Drains by others: never resumed, never overwritten.
set_node "IDLE+DRAIN" "bad fan"
expect 0 "" "fit, drained by an operator"
set_node "DOWN+DRAIN" "NHC: check_fs_mount: /scratch not mounted"
expect 0 "" "fit, drained by NHC"
echo 1 >"$MNT/0000:41:00.5/quarantined"
expect 1 "" "unfit, drained by NHC"
node_is "DOWN+DRAIN|NHC: check_fs_mount: /scratch not mounted"
set_node "IDLE+DRAIN" "vfhealthy: someone else's prefix"
echo 0 >"$MNT/0000:41:00.5/quarantined"
expect 0 "" "fit, drained with a reason that only looks like ours"

# scontrol failing: exit 2.
SCONTROL_FAIL=1 run_check
[[ $rc == 2 ]] || fail "a failing scontrol: exit $rc, want 2: $out"

# The state unknown: drain.
set_node IDLE
CHECK_MOUNT=$T/nothing expect 1 \
	"update NodeName=gpu07 State=DRAIN Reason=vfhealth:\\ no\\ vfhealth\\ at\\ $T/nothing:\\ No\\ such\\ file\\ or\\ directory" \
	"no mount"
set_node IDLE
fill_db_dir
run_check
[[ $rc == 1 && $updates == "update NodeName=gpu07 State=DRAIN Reason=vfhealth:\\ store\\ unavailable:\\ "* ]] ||
	fail "store unavailable: exit $rc, scontrol calls '$updates'"
node_is "IDLE+DRAIN|vfhealth: store unavailable: $(sed 's/^unavailable: //' "$MNT/status")"
set_node IDLE
kill_daemon
run_check
[[ $rc == 1 && $updates == *"Reason=vfhealth:\\ no\\ vfhealth\\ at\\ "*"Transport\\ endpoint\\ is\\ not\\ connected" ]] ||
	fail "a dead mount: exit $rc, calls '$updates'"
echo "slurm check OK"
