#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# slurm-check.sh - examples/slurm/vfhealth-slurm-check.sh against a live
# mount, run as slurmd runs it (SLURMD_NODENAME and no other environment,
# no PATH; its settings from the file it reads), with a stand-in scontrol
# that records its arguments and answers `scontrol show node` as Slurm
# does (State= and Reason= with its [user@time] suffix, kept across
# calls): a fit node is left alone; every VF out of service in any mix of
# reasons (held, quarantined, held back, on a drained GPU), an unavailable
# store, a missing, dead or stopped mount drain it with a reason prefixed
# "vfhealth:" (once, not again while drained so); a claimed VF is in
# service (a busy node stays); a fit node drained with that prefix is
# resumed; a drain by an operator or by NHC is never resumed nor
# overwritten; observe mode drains nothing but for a GPU's drain; a
# failing scontrol exits 2.  The real Slurm: slurm-real.sh.
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
conf=$T/check.conf

# run_check: the check as slurmd runs it; its status in rc, stdout+stderr
# in out, the scontrol calls it made (beyond show node) in updates.
run_check() {
	: >"$calls"
	rc=0
	printf '%s\n' "# the check's settings" "VFHEALTH_MOUNT=${CHECK_MOUNT:-$MNT}" \
		"VFHEALTH_SLURM_SCONTROL=$T/bin/scontrol" "VFHEALTH_SLURM_LOCK=$T/slurm.lock" \
		"VFHEALTH_TIMEOUT=2" "VFHEALTH_SLURM_NODE=not-this-one" >"$conf"
	out=$(env -i SLURMD_NODENAME=gpu07 VFHEALTH_SLURM_CONFIG="$conf" SCONTROL_NODE="$node" \
		SCONTROL_CALLS="$calls" ${SCONTROL_FAIL:+SCONTROL_FAIL=1} "$check" 2>&1) || rc=$?
	updates=$(grep -v '^show node gpu07$' "$calls" || true)
	grep -qx 'show node gpu07' "$calls" || fail "the check did not ask Slurm for the node: $(cat "$calls")"
}
expect() { # RC UPDATES WHAT
	run_check
	[[ $rc == "$1" ]] || fail "$3: exit $rc, want $1: $out"
	[[ $updates == "$2" ]] || fail "$3: scontrol calls '$updates', want '$2' (said: $out)"
	pass "$3: exit $1, scontrol calls as wanted"
}
set_node() { echo "$1|${2:-}" >"$node"; }
node_is() { [[ $(cat "$node") == "$1" ]] || fail "node is '$(cat "$node")', want '$1'"; }

mount_tmpfs "$T/db" 2m 0700
# a fake sysfs: two VFs of an NVIDIA GPU with SR-IOV (so that it drains)
sys=$T/sys/bus/pci/devices
mkdir -p "$sys/0000:41:00.0"
echo 0x10de >"$sys/0000:41:00.0/vendor"
echo 16 >"$sys/0000:41:00.0/sriov_totalvfs"
for vf in 0000:41:00.4 0000:41:00.5; do
	mkdir -p "$sys/$vf"
	ln -s ../0000:41:00.0 "$sys/$vf/physfn"
	ln -s "../$vf" "$sys/0000:41:00.0/virtfn${vf##*.}"
done
# VFs are registered by hand here (mkdir)
start_daemon --no-sentinel --register manual --sysfs-root "$T/sys"
mkdir "$MNT/0000:41:00.4" "$MNT/0000:41:00.5"
set_node IDLE

expect 0 "" "a fit node"
echo 1 >"$MNT/0000:41:00.4/quarantined"
expect 0 "" "one VF of two out of service"

# A busy node stays: the other VF claimed by a running VM is in service.
: >"$MNT/0000:41:00.5/assignments/vm-7"
expect 0 "" "the other VF claimed"
rm "$MNT/0000:41:00.5/assignments/vm-7"

# Quarantined, and held back by the breaker (threshold 1, one quarantine allowed).
echo 0 >"$MNT/0000:41:00.4/quarantined"
echo 1 >"$MNT/threshold"
echo 1 >"$MNT/max_quarantined"
/bin/echo "failed vm-6 - NVRM: RmInitAdapter failed" >"$MNT/0000:41:00.4/report"
/bin/echo "failed vm-8 - NVRM: RmInitAdapter failed" >"$MNT/0000:41:00.5/report"
[[ $(cat "$MNT/0000:41:00.5/state") == held-back ]] || fail "0000:41:00.5 not held back: $(cat "$MNT/0000:41:00.5/state")"
expect 1 'update NodeName=gpu07 State=DRAIN Reason=vfhealth:\ all\ 2\ VFs\ out\ of\ service:\ 0000:41:00.4\ quarantined\,\ 0000:41:00.5\ held\ back' \
	"every VF out of service: quarantined, held back"
node_is "IDLE+DRAIN|vfhealth: all 2 VFs out of service: 0000:41:00.4 quarantined, 0000:41:00.5 held back"
expect 1 "" "still unfit, drained already"

echo observe >"$MNT/mode"
set_node IDLE
expect 0 "" "observe mode"
grep -q "observe mode: enforcing would drain gpu07: all 2 VFs out of service: 0000:41:00.4 quarantined, " <<<"$out" ||
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

# Its GPU drained: unfit, also in observe mode (a drain refuses claims there too).
set_node IDLE
echo 1 >"$MNT/gpus/0000:41:00.0/drain"
expect 1 'update NodeName=gpu07 State=DRAIN Reason=vfhealth:\ all\ 2\ VFs\ out\ of\ service:\ GPU\ 0000:41:00.0\ drained' \
	"a drained GPU"
echo observe >"$MNT/mode"
expect 1 "" "a drained GPU, observe mode"
echo enforce >"$MNT/mode"
echo 0 >"$MNT/gpus/0000:41:00.0/drain"
expect 0 'update NodeName=gpu07 State=RESUME' "the GPU serving again"

# A stopped vfhealthd: drained within the deadline, no process left.
kill -STOP "$DAEMON_PID"
start=$SECONDS
expect 1 "update NodeName=gpu07 State=DRAIN Reason=vfhealth:\\ $MNT\\ not\\ answering" "a stopped vfhealthd"
((SECONDS - start < 30)) || fail "a stopped vfhealthd: the check took $((SECONDS - start)) s"
left=$(pgrep -af -- "--read $MNT\$|(cat|ls) -(1 )?-- $MNT" || true)
[[ -z $left ]] || fail "processes left behind: $left"
kill -CONT "$DAEMON_PID"
expect 0 'update NodeName=gpu07 State=RESUME' "vfhealthd going on"

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
