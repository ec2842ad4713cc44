#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sriov-cycle.sh - vfhealthd's recovery program (--recover-program): the
# runbook's SR-IOV cycle of one parent GPU, the only known fix for a wedged
# VF.  It destroys every VF of the GPU: vfhealthd runs it only once the GPU
# is drained (no claim, no reservation on any of its VFs), only on what
# sysfs shows as an NVIDIA GPU with SR-IOV, and checks afterwards that
# every VF is back before clearing them.
#
#   sriov-cycle.sh PF
#
# PF is the parent GPU's PCI address (0000:41:00.0); VFHEALTH_PARENT must
# name it too.  From the environment vfhealthd sets: VFHEALTH_NUMVFS (how
# many VFs to restore when sriov_numvfs already reads 0), VFHEALTH_SYSFS_ROOT
# (default /sys).  VFHEALTH_CYCLE_WAIT_S bounds each wait for the VFs to go
# and to come back (default 60 s; keep it under --recover-timeout).
#
# Steps:
#  1. read SYSFS_ROOT/bus/pci/devices/PF/sriov_numvfs: the N VFs to restore;
#  2. stop those of nvidia-dcgm.service, dcgm.service and
#     nvidia-persistenced.service that are active (they keep the GPU open);
#  3. disable SR-IOV (unless sriov_numvfs already reads 0): `sriov-manage
#     -d PF` when sriov-manage is on PATH or in /usr/lib/nvidia, else
#     `echo 0 > sriov_numvfs`; wait until the virtfn links are gone;
#  4. enable it: `sriov-manage -e PF`, else `echo N > sriov_numvfs`; wait
#     (`udevadm settle`, then the virtfn links) until N VFs are back;
#  5. start again exactly the services step 2 stopped, also when a step
#     failed or the script was terminated (SIGTERM: vfhealthd's
#     --recover-timeout, or vfhealthd stopping or dying mid-cycle; it kills
#     what is left after its grace, 10 s).
#
# Exit: 0 the VFs are back; 1 a step failed (stderr has one line: what
# failed and what to do); 2 refused, nothing done (a bad PF, no
# VFHEALTH_PARENT, no sriov_numvfs, a device whose sysfs `vendor` is not
# NVIDIA's 0x10de or that has no `sriov_totalvfs`).  Progress goes to stdout, one line a
# step; vfhealthd logs each line, and the stderr line becomes the reason of
# the GPU's `failed` state.
#
# By hand, on a drained GPU (`cat /run/vfhealth/gpus/0000:41:00.0/state`
# reads drained), as vfhealthd runs it:
#
#   # env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin VFHEALTH_PARENT=0000:41:00.0 \
#   >     /usr/libexec/vfhealth/sriov-cycle.sh 0000:41:00.0
#   sriov-cycle: 0000:41:00.0: cycling SR-IOV: 2 VFs to restore
#   sriov-cycle: 0000:41:00.0: stopped nvidia-dcgm.service
#   sriov-cycle: 0000:41:00.0: stopped nvidia-persistenced.service
#   sriov-cycle: 0000:41:00.0: sriov-manage -d 0000:41:00.0
#   sriov-cycle: 0000:41:00.0: sriov-manage -e 0000:41:00.0
#   sriov-cycle: 0000:41:00.0: 2 VFs back after 0.4 s
#   sriov-cycle: 0000:41:00.0: started nvidia-persistenced.service
#   sriov-cycle: 0000:41:00.0: started nvidia-dcgm.service
#   # echo $?
#   0
#
# (Lines sriov-manage itself prints come between, prefixed the same way.)
# When a VF does not come back:
#
#   # env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin VFHEALTH_PARENT=0000:41:00.0 \
#   >     /usr/libexec/vfhealth/sriov-cycle.sh 0000:41:00.0 2>&1 >/dev/null
#   sriov-cycle: 0000:41:00.0: only 1 of 2 VFs back 60 s after enabling SR-IOV; check dmesg and ls -l /sys/bus/pci/devices/0000:41:00.0/virtfn*, then return the GPU to service by hand (runbook.md#a-gpu-failed-recovery)
#   # echo $?
#   1
set -Eeuo pipefail

me=sriov-cycle
# What keeps the GPU open, in the order they stop; they start in reverse.
services=(nvidia-dcgm.service dcgm.service nvidia-persistenced.service)
pci_re='^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$'
manual='then return the GPU to service by hand (runbook.md#a-gpu-failed-recovery)'

# refuse MESSAGE: nothing has changed yet; exit 2.
refuse() {
	echo "$me: $*" >&2
	exit 2
}

(($# == 1)) || refuse "usage: sriov-cycle.sh PF (vfhealthd's --recover-program; VFHEALTH_PARENT=PF in the environment)"
pf=$1
[[ $pf =~ $pci_re ]] || refuse "'$pf' is not a PCI address like 0000:41:00.0"
[[ -n ${VFHEALTH_PARENT:-} ]] ||
	refuse "$pf: VFHEALTH_PARENT is not set: this is vfhealthd's --recover-program; by hand, drain the GPU first and set VFHEALTH_PARENT=$pf"
[[ $VFHEALTH_PARENT == "$pf" ]] || refuse "$pf: VFHEALTH_PARENT names '$VFHEALTH_PARENT', not this GPU"
wait_s=${VFHEALTH_CYCLE_WAIT_S:-60}
[[ $wait_s =~ ^[1-9][0-9]{0,3}$ ]] || refuse "VFHEALTH_CYCLE_WAIT_S must be 1..9999 seconds, not '$wait_s'"
env_numvfs=${VFHEALTH_NUMVFS:-}
[[ -z $env_numvfs || $env_numvfs =~ ^(0|[1-9][0-9]{0,3})$ ]] ||
	refuse "$pf: VFHEALTH_NUMVFS must be a number of VFs, not '$env_numvfs'"
sysfs_root=${VFHEALTH_SYSFS_ROOT:-/sys}
dev=$sysfs_root/bus/pci/devices/$pf
numvfs_file=$dev/sriov_numvfs
[[ -f $numvfs_file ]] ||
	refuse "$pf: no $numvfs_file: not an SR-IOV physical function (or VFHEALTH_SYSFS_ROOT is wrong)"
# Never another device, whatever the caller says: vfhealthd checks this
# too, the script on its own as well (defence in depth).
vendor=$(cat -- "$dev/vendor" 2>/dev/null) || vendor=
[[ $vendor == 0x10de ]] ||
	refuse "$pf: not an NVIDIA GPU: $dev/vendor reads '${vendor:-nothing}', not 0x10de"
[[ -e $dev/sriov_totalvfs ]] || refuse "$pf: no $dev/sriov_totalvfs: not an SR-IOV GPU"
cur=$(cat -- "$numvfs_file" 2>&1) || refuse "$pf: cannot read $numvfs_file: ${cur##*: }"
[[ $cur =~ ^[0-9]+$ ]] || refuse "$pf: $numvfs_file reads '$cur', not a number"
# sriov_numvfs reads 0 when SR-IOV was left disabled (a cycle stopped half
# way): then the caller's count says how many to bring back.
n=$cur
((n > 0)) || n=${env_numvfs:-0}
((n > 0)) || refuse "$pf: SR-IOV is disabled (sriov_numvfs 0) and VFHEALTH_NUMVFS does not say how many VFs to restore"
sriov_manage=$(command -v sriov-manage || true)
[[ -n $sriov_manage || ! -x /usr/lib/nvidia/sriov-manage ]] || sriov_manage=/usr/lib/nvidia/sriov-manage

say() { printf '%s\n' "$me: $pf: $*"; }

# From here on the GPU changes: every exit goes through finish, whose line
# is the only one on stderr (fd 3); the shell's own messages ("Terminated"
# when a step is killed) go to stdout with the rest.
exec 3>&2 2>&1
stopped=()  # the services this run stopped, in the order it stopped them
step="starting"
reason=     # what failed and what to do, set by die or a signal
err_at=
finish() {
	local rc=$? i s out not_started=() start_err=
	trap - ERR
	set +e
	for ((i = ${#stopped[@]} - 1; i >= 0; i--)); do
		s=${stopped[i]}
		if out=$(systemctl start "$s" 2>&1); then
			say "started $s"
		else
			not_started+=("$s")
			start_err=${out##*$'\n'}
		fi
	done
	if ((rc == 0 && ${#not_started[@]} == 0)); then
		exit 0
	fi
	if ((rc != 0)) && [[ -z $reason ]]; then
		reason="failed unexpectedly while $step (exit $rc${err_at:+, at $err_at}); $manual"
	fi
	if ((${#not_started[@]})); then
		s="${not_started[*]} did not start again (${start_err:-no message}): start it with systemctl start ${not_started[*]}"
		if ((rc == 0)); then
			reason="the VFs are back, but $s, $manual"
		else
			reason="$reason; also $s"
		fi
	fi
	echo "$me: $pf: $reason" >&3
	((rc != 0)) || rc=1
	exit "$rc"
}
# die REASON: the step failed; finish restarts the services and says REASON.
die() {
	reason=$1
	exit 1
}
trap 'err_at="line $LINENO: $BASH_COMMAND"' ERR
on_term() {
	reason="terminated by SIGTERM (vfhealthd's --recover-timeout) while $step; $manual"
	exit 143
}
on_int() {
	reason="interrupted while $step; $manual"
	exit 130
}
trap on_term TERM
trap on_int INT
trap finish EXIT

# run CMD...: CMD's output to stdout, a line each, prefixed with its name;
# its last line in $last for the reason when it fails.
last=
run() {
	local out rc=0 line
	out=$("$@" 2>&1) || rc=$?
	if [[ -n $out ]]; then
		while IFS= read -r line; do say "${1##*/}: $line"; done <<<"$out"
	fi
	last=${out##*$'\n'}
	[[ -n $last ]] || last="exit status $rc"
	return "$rc"
}
# set_numvfs N: write N to sriov_numvfs as the kernel takes it, one write.
set_numvfs() {
	local err
	if err=$({ printf '%s\n' "$1" >"$numvfs_file"; } 2>&1); then
		return 0
	fi
	last=${err##*: }
	return 1
}
count_vfs() {
	local l c=0
	for l in "$dev"/virtfn*; do
		[[ -L $l ]] && c=$((c + 1))
	done
	echo "$c"
}
now_ms() {
	local t=${EPOCHREALTIME//[.,]/}
	echo $((10#$t / 1000))
}
# wait_vfs gone|back: until no virtfn link is left, or at least n are
# there, at most wait_s seconds; their number in $have, the time in $took.
have=0
took=0
wait_vfs() {
	local start end
	start=$(now_ms)
	end=$((start + wait_s * 1000))
	if command -v udevadm >/dev/null; then
		udevadm settle --timeout="$wait_s" >/dev/null 2>&1 || true
	fi
	while have=$(count_vfs); ! { [[ $1 == gone ]] && ((have == 0)) || { [[ $1 == back ]] && ((have >= n)); }; }; do
		(($(now_ms) < end)) || return 1
		sleep 0.1
	done
	took=$((($(now_ms) - start) / 100))
	took=$((took / 10)).$((took % 10))
}

say "cycling SR-IOV: $n VFs to restore"

if command -v systemctl >/dev/null; then
	for s in "${services[@]}"; do
		systemctl is-active --quiet "$s" || continue
		step="stopping $s"
		# Started again at exit even when its stop fails half way.
		stopped+=("$s")
		run systemctl stop "$s" ||
			die "systemctl stop $s failed: $last; stop what holds the GPU, cycle SR-IOV by hand, $manual"
		say "stopped $s"
	done
else
	say "no systemctl: no service stopped"
fi

# sriov off|on: disable or enable SR-IOV, through sriov-manage when there
# is one, else sriov_numvfs; $step says which.
sriov() {
	local flag=-d count=0
	[[ $1 == off ]] || { flag=-e; count=$n; }
	if [[ -n $sriov_manage ]]; then
		step="sriov-manage $flag $pf"
		say "$step"
		run "$sriov_manage" "$flag" "$pf"
	else
		step="echo $count > $numvfs_file"
		say "$step"
		set_numvfs "$count"
	fi
}

# Already disabled (a cycle stopped half way): nothing to disable.
if ((cur > 0)); then
	sriov off ||
		die "$step failed: $last; check dmesg and what still holds the GPU (nvidia-smi), cycle SR-IOV by hand, $manual"
fi
step="waiting for the VFs to go"
wait_vfs gone ||
	die "$have VFs still present $wait_s s after disabling SR-IOV; check dmesg, cycle SR-IOV by hand, $manual"

sriov on ||
	die "$step failed: $last; SR-IOV is off on this GPU: check dmesg, enable it by hand ($step), $manual"
step="waiting for the VFs to come back"
wait_vfs back ||
	die "only $have of $n VFs back $wait_s s after enabling SR-IOV; check dmesg and ls -l $dev/virtfn*, $manual"
say "$have VFs back after $took s"
