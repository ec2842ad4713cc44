#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# vfhealth-slurm-check.sh - a Slurm health check for nodes that host GPU VMs
# on vGPU VFs: drains the node when vfhealth says no VF can be placed on it,
# and resumes it once one can, touching only drains it made itself.
#
#   slurm.conf:  HealthCheckProgram=/usr/libexec/vfhealth/vfhealth-slurm-check.sh
#                HealthCheckInterval=60
#
# Drains (scontrol update NodeName=NODE State=DRAIN Reason="vfhealth: WHY")
# when the store is unavailable (or the mount is absent or does not answer:
# the VFs' state is unknown, placement is refused) or when every registered
# VF is out of service.  Resumes (State=RESUME) only a node whose drain
# reason starts with "vfhealth:", so a drain by an operator or by NHC
# ("NHC:") is never undone, and a node drained for another reason is left
# as it is.  In observe mode it says what it would do and drains nothing.
#
# Environment: VFHEALTH_MOUNT (default /run/vfhealth), VFHEALTH_SLURM_NODE
# (default: hostname -s).  Exit 0 when vfhealth finds the node fit, 1 when
# it does not (drained now or before), 2 when scontrol failed.
set -uo pipefail

mount=${VFHEALTH_MOUNT:-/run/vfhealth}
node=${VFHEALTH_SLURM_NODE:-$(hostname -s)}
prefix="vfhealth:"

# check_vfhealth: why no VF can be placed here in $why (empty: fit), the
# mode in $mode.
check_vfhealth() {
	local status out n=0 out_n=0 e
	why=
	mode=enforce
	if ! status=$(cat -- "$mount/status" 2>&1); then
		why="no vfhealth at $mount: ${status##*: }"
	elif [[ $status != ok ]]; then
		why="store $status"
	elif ! out=$(cat -- "$mount/quarantined" 2>&1); then
		why="store unavailable: ${out##*: }"
	elif ! mode=$(cat -- "$mount/mode" 2>&1); then
		why="no vfhealth at $mount: ${mode##*: }"
		mode=enforce
	else
		for e in "$mount"/[0-9a-f][0-9a-f][0-9a-f][0-9a-f]:*; do
			[[ -d $e ]] && n=$((n + 1))
		done
		[[ -z $out ]] || out_n=$(wc -l <<<"$out")
		((n == 0 || out_n < n)) || why="all $n VFs out of service"
	fi
}

# node_field KEY: KEY's value in `scontrol show node` (Reason runs to the
# end of its line and ends with " [user@time]").
node_field() {
	case $1 in
	Reason) sed -n 's/^[[:space:]]*Reason=\(.*\)$/\1/p' <<<"$shown" | sed 's/ \[[^]]*\]$//' ;;
	*) grep -o "\(^\|[[:space:]]\)$1=[^[:space:]]*" <<<"$shown" | head -n 1 | sed "s/^[[:space:]]*$1=//" ;;
	esac
}

check_vfhealth
if ! shown=$(scontrol show node "$node" 2>&1); then
	echo "vfhealth-slurm-check: scontrol show node $node: $shown" >&2
	exit 2
fi
state=$(node_field State)
reason=$(node_field Reason)
drained=false
[[ $state == *DRAIN* ]] && drained=true
ours=false
[[ $reason == "$prefix"* ]] && ours=true

if [[ -n $why && $mode == observe ]]; then
	echo "vfhealth-slurm-check: observe mode: enforcing would drain $node: $why"
	why=
fi

if [[ -n $why ]]; then
	if $drained && ! $ours; then
		echo "vfhealth-slurm-check: $node unfit ($why), already drained: $reason"
		exit 1
	fi
	[[ $reason == "$prefix $why" ]] && $drained && exit 1
	if ! scontrol update NodeName="$node" State=DRAIN Reason="$prefix $why"; then
		echo "vfhealth-slurm-check: cannot drain $node" >&2
		exit 2
	fi
	echo "vfhealth-slurm-check: drained $node: $prefix $why"
	exit 1
fi

if $drained && $ours; then
	if ! scontrol update NodeName="$node" State=RESUME; then
		echo "vfhealth-slurm-check: cannot resume $node" >&2
		exit 2
	fi
	echo "vfhealth-slurm-check: resumed $node (was: $reason)"
fi
exit 0
