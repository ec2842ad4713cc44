#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# slurm-real.sh - examples/slurm/vfhealth-slurm-check.sh as Slurm's health
# check under a real Slurm (Debian's slurm-wlm): munged (as user munge),
# `slurmctld -D -i` and `slurmd -D -N gpunode1`, all started here on private
# ports, a private state directory and munge socket, SLURM_CONF naming this
# test's slurm.conf (HealthCheckInterval=2), stopped by their pids at exit.
# The node's NodeName is not the host's name: the check must take the one
# slurmd gives it (SLURMD_NODENAME; slurmd passes nothing else, no PATH).
# Against a live vfhealthd with a fake sysfs (one NVIDIA GPU, two VFs):
# the GPU drained drains the node with the check's reason; the GPU serving
# again resumes it; a SIGSTOPped vfhealthd drains it ("not answering")
# while no reader of the mount nor check piles up; vfhealthd going on
# resumes it; an operator's drain (Reason="ops: ...") is never undone nor
# overwritten, fit or not.  Each case prints `sinfo -R` and the node's
# State and Reason as Slurm shows them.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse
for p in munged slurmctld slurmd scontrol sinfo; do
	command -v "$p" >/dev/null || skip "no $p (Debian: munge, slurmctld, slurmd, slurm-client)"
done
id munge >/dev/null 2>&1 || skip "no user munge"

node=gpunode1
[[ $(hostname -s) != "$node" ]] || skip "this host is named $node"
S=$T/slurm
mkdir -p "$S/state" "$S/spool" "$S/munge"
# a copy of the check, so that its processes are told from other tests'
check=$S/vfhealth-slurm-check.sh
install -m 755 "$source_root/examples/slurm/vfhealth-slurm-check.sh" "$check"
export SLURM_CONF=$S/slurm.conf

# ---- munged, as user munge, on a private socket ------------------------------

chown munge: "$S/munge"
dd if=/dev/urandom of="$S/munge/munge.key" bs=1024 count=1 status=none
chown munge: "$S/munge/munge.key"
chmod 0600 "$S/munge/munge.key"
setpriv --reuid=munge --regid=munge --init-groups munged -F --force \
	--socket="$S/munge/socket" --key-file="$S/munge/munge.key" \
	--pid-file="$S/munge/munged.pid" --seed-file="$S/munge/seed" \
	--log-file="$S/munge/munged.log" >"$S/munged.out" 2>&1 &
BG_PIDS+=("$!")
munge_up() { munge -S "$S/munge/socket" -n </dev/null | unmunge -S "$S/munge/socket" >/dev/null 2>&1; }
wait_for 30 "munged to answer" munge_up

# ---- slurmctld and slurmd ------------------------------------------------------------

read -r ctld_port d_port < <(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')
cat >"$S/slurm.conf" <<EOF
ClusterName=vfhtest
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$S/munge/socket
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
HealthCheckProgram=$S/health-check
HealthCheckInterval=2
HealthCheckNodeState=ANY
NodeName=$node NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN
PartitionName=gpu Nodes=$node Default=YES State=UP
EOF
# The check's settings, in the file it reads.  slurmd runs the program with
# SLURMD_NODENAME only; this wrapper names the test's settings file instead
# of /etc/default's, and counts the runs.
cat >"$S/check.conf" <<EOF
# vfhealth-slurm-check settings for this test
VFHEALTH_MOUNT=$MNT
VFHEALTH_TIMEOUT=3
VFHEALTH_SLURM_LOCK=$S/check.lock
SLURM_CONF=$S/slurm.conf
EOF
cat >"$S/health-check" <<EOF
#!/bin/sh
VFHEALTH_SLURM_CONFIG=$S/check.conf $check >>$S/check.out 2>&1
echo "\$?" >>$S/check.runs
EOF
chmod 755 "$S/health-check"
: >"$S/check.runs"

# A fake sysfs: an NVIDIA GPU with SR-IOV and two VFs.
sys=$T/sys/bus/pci/devices
pf=0000:41:00.0
mkdir -p "$sys/$pf"
echo 0x10de >"$sys/$pf/vendor"
echo 16 >"$sys/$pf/sriov_totalvfs"
for vf in 0000:41:00.4 0000:41:00.5; do
	mkdir -p "$sys/$vf"
	ln -s "../$pf" "$sys/$vf/physfn"
	ln -s "../$vf" "$sys/$pf/virtfn${vf##*.}"
done
# VFs are registered by hand here (mkdir)
start_daemon --no-sentinel --register manual --sysfs-root "$T/sys"
# shellcheck disable=SC2016 # expanded at exit
EXIT_HOOKS+=('[[ -z $DAEMON_PID ]] || kill -CONT "$DAEMON_PID"')
mkdir "$MNT/0000:41:00.4" "$MNT/0000:41:00.5"

slurmctld -D -i >"$S/slurmctld.out" 2>&1 &
BG_PIDS+=("$!")
slurmd -D -N "$node" >"$S/slurmd.out" 2>&1 &
BG_PIDS+=("$!")

# slurm_fail WHY: fail, with Slurm's and the check's logs.
slurm_fail() {
	local f
	for f in slurmctld.log slurmd.log check.out; do
		echo "--- $f (last 20 lines) ---" >&2
		tail -n 20 "$S/$f" >&2 2>/dev/null || true
	done
	fail "$1"
}
# node_state, node_reason: as `scontrol show node` says them now.
shown() { scontrol show node "$node" 2>&1; }
node_state() { shown | grep -o 'State=[^ ]*' | head -n 1 | cut -d= -f2; }
node_reason() { shown | sed -n 's/^ *Reason=\(.*\) \[[^]]*\]$/\1/p'; }
drained_with() { [[ $(node_state) == *DRAIN* && $(node_reason) == "$1" ]]; }
not_drained() { [[ -n $(node_state) && $(node_state) != *DRAIN* ]]; }
runs() { wc -l <"$S/check.runs"; }
# after_runs N: return once the check has run N more times
after_runs() {
	local want=$(($(runs) + $1))
	ran() { (($(runs) >= want)); }
	wait_until 60 ran || slurm_fail "the check did not run $1 more times"
}
# show CASE: what Slurm says, for the record
show() {
	echo "== $1"
	sinfo -R
	shown | grep -E '^ *(NodeName|State|Reason)='
}

wait_until 60 not_drained || slurm_fail "$node never came up: $(shown)"
after_runs 1
not_drained || slurm_fail "a fit node was drained: $(shown)"
show "fit"

# A drained GPU: every VF out of service.
echo 1 >"$MNT/gpus/$pf/drain"
wait_until 60 drained_with "vfhealth: all 2 VFs out of service: GPU $pf drained" ||
	slurm_fail "not drained for the drained GPU: $(shown)"
show "GPU drained"

echo 0 >"$MNT/gpus/$pf/drain"
wait_until 60 not_drained || slurm_fail "not resumed: $(shown)"
show "GPU serving again"

# A stopped vfhealthd: drained; no pile-up of checks nor of readers.
kill -STOP "$DAEMON_PID"
wait_until 60 drained_with "vfhealth: $MNT not answering" || slurm_fail "not drained for a stopped vfhealthd: $(shown)"
show "vfhealthd stopped"
# Every check ends within its bound (2 s for the lock, 3 s for the reads,
# scontrol's few milliseconds, with room for a busy machine): none lives
# 15 s, over 10 runs (20 s); and the lock lets one read the mount at a time.
declare -A first_seen=()
most_readers=0
want=$(($(runs) + 10))
while (($(runs) < want)); do
	for p in $(pgrep -f -- "bash $check\$" || true); do
		: "${first_seen[$p]:=$SECONDS}"
		((SECONDS - first_seen[$p] < 15)) ||
			slurm_fail "a check on a stopped vfhealthd runs for 15 s: $(ps -o pid,stat,etime,args -p "$p")"
	done
	readers=$(pgrep -fc -- "(cat|ls) -(1 )?-- $MNT" || true)
	((readers <= most_readers)) || most_readers=$readers
	((readers <= 1)) || slurm_fail "$readers readers of the mount at once: $(pgrep -af -- "-- $MNT")"
	sleep 0.1
done
echo "a stopped vfhealthd, 10 checks: ${#first_seen[@]} seen, each ended within 15 s; at most $most_readers reader at once"
kill -CONT "$DAEMON_PID"
wait_until 60 not_drained || slurm_fail "not resumed after vfhealthd went on: $(shown)"
show "vfhealthd going on"
left=$(pgrep -af -- "(cat|ls) -(1 )?-- $MNT" || true)
[[ -z $left ]] || slurm_fail "readers left behind: $left"

# An operator's drain: never undone, never overwritten.
scontrol update NodeName="$node" State=DRAIN Reason="ops: fan replaced"
after_runs 3
drained_with "ops: fan replaced" || slurm_fail "the operator's drain was touched while fit: $(shown)"
echo 1 >"$MNT/gpus/$pf/drain"
after_runs 3
drained_with "ops: fan replaced" || slurm_fail "the operator's drain was touched while unfit: $(shown)"
show "an operator's drain, the GPU drained"
echo 0 >"$MNT/gpus/$pf/drain"
after_runs 3
drained_with "ops: fan replaced" || slurm_fail "the operator's drain was undone: $(shown)"
scontrol update NodeName="$node" State=RESUME
echo "slurm (real) OK"
