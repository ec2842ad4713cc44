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
# when every registered VF is out of service, whatever the mix of reasons:
# quarantined, held, held back by the breaker, or on a GPU that is
# draining, drained, recovering or failed (a VF claimed by a running VM is
# in service: a busy node is never drained); when the store is unavailable
# or the mount absent; and when the mount does not answer within
# VFHEALTH_TIMEOUT seconds (the VFs' state is unknown, placement is
# refused).  Resumes (State=RESUME) only a node whose drain reason starts
# with "vfhealth:", so a drain by an operator or by NHC ("NHC:") is never
# undone.  In observe mode it says what it would do and drains nothing,
# but for VFs on GPUs that are not serving (a GPU's drain refuses claims in
# observe mode too).
#
# slurmd runs it with SLURMD_NODENAME and no other environment (no PATH),
# kills it after 60 s and starts the next one at the next interval.  So:
# the node is SLURMD_NODENAME (else VFHEALTH_SLURM_NODE, else hostname -s);
# the settings come from /etc/default/vfhealth-slurm-check (KEY=VALUE
# lines, the file VFHEALTH_SLURM_CONFIG names instead; a variable set in
# the environment wins); every read of the mount runs in one process group
# that is killed at the deadline; and a lock lets one check run at a time:
# a reader the kernel cannot kill keeps the lock, and later checks report
# the mount as not answering instead of piling up behind it.
#
# Settings: VFHEALTH_MOUNT (/run/vfhealth), VFHEALTH_SLURM_NODE,
# VFHEALTH_TIMEOUT (10: seconds for all reads of the mount, 1 to 30),
# VFHEALTH_SLURM_LOCK (/run/vfhealth-slurm-check.lock; a directory only
# root writes), VFHEALTH_SLURM_SCONTROL (scontrol), SLURM_CONF (for
# scontrol, when slurm.conf is not where it looks).  Exit 0 when vfhealth
# finds the node fit, 1 when it does not (drained now or before), 2 when
# scontrol failed.
set -uo pipefail
PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C
export PATH LC_ALL

# read_mount MOUNT (run as `check --read MOUNT` under the deadline): what
# the node's VFs are, on stdout: `unknown WHY`, or `mode MODE`, one `vf VF`
# per registered VF and one `out VF WHY` per VF out of service.  Every
# read's errors go into the captured text, never to an inherited
# descriptor.
read_mount() {
	local m=$1 v mode vf g st line
	local -A own=() gpu=()
	if ! v=$(cat -- "$m/status" 2>&1); then
		echo "unknown no vfhealth at $m: ${v##*: }"
		return
	fi
	[[ $v == ok ]] || { echo "unknown store $v"; return; }
	mode=$(cat -- "$m/mode" 2>&1) || { echo "unknown no vfhealth at $m: ${mode##*: }"; return; }
	# quarantined lists quarantined and held VFs; held_back the breaker's.
	v=$(cat -- "$m/quarantined" 2>&1) || { echo "unknown store unavailable: ${v##*: }"; return; }
	for vf in $v; do
		st=$(cat -- "$m/$vf/state" 2>&1) || st=quarantined
		[[ $st == held ]] || st=quarantined
		own[$vf]=$st
	done
	v=$(cat -- "$m/held_back" 2>&1) || { echo "unknown store unavailable: ${v##*: }"; return; }
	for vf in $v; do own[$vf]="held back"; done
	v=$(ls -1 -- "$m/gpus" 2>&1) || { echo "unknown no vfhealth at $m: ${v##*: }"; return; }
	for g in $v; do
		# (a GPU whose last VF left since the listing is gone: no VF of it counts)
		if ! st=$(cat -- "$m/gpus/$g/state" 2>&1); then
			[[ $st == *"No such file or directory" ]] && continue
			echo "unknown store unavailable: ${st##*: }"
			return
		fi
		[[ $st == serving ]] && continue
		if ! line=$(cat -- "$m/gpus/$g/vfs" 2>&1); then
			[[ $line == *"No such file or directory" ]] && continue
			echo "unknown store unavailable: ${line##*: }"
			return
		fi
		for vf in $line; do gpu[$vf]="GPU $g $st"; done
	done
	v=$(ls -1 -- "$m" 2>&1) || { echo "unknown no vfhealth at $m: ${v##*: }"; return; }
	echo "mode $mode"
	for vf in $v; do
		[[ $vf =~ ^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$ ]] || continue
		echo "vf $vf"
		if [[ -n ${gpu[$vf]:-} ]]; then
			echo "out $vf ${gpu[$vf]}"
		elif [[ -n ${own[$vf]:-} ]]; then
			echo "out $vf ${own[$vf]}"
		fi
	done
}

if [[ ${1:-} == --read ]]; then
	read_mount "$2"
	exit 0
fi

# ---- settings ----------------------------------------------------------------

config=/etc/default/vfhealth-slurm-check
config=${VFHEALTH_SLURM_CONFIG:-$config}
keys=(VFHEALTH_MOUNT VFHEALTH_SLURM_NODE VFHEALTH_TIMEOUT VFHEALTH_SLURM_LOCK VFHEALTH_SLURM_SCONTROL SLURM_CONF)
if [[ -r $config ]]; then
	while IFS= read -r line || [[ -n $line ]]; do
		[[ $line =~ ^[[:space:]]*(#|$) ]] && continue
		key=${line%%=*} value=${line#*=}
		if [[ $line != *=* || " ${keys[*]} " != *" $key "* ]]; then
			echo "vfhealth-slurm-check: $config: ignored: $line" >&2
			continue
		fi
		[[ -n ${!key+set} ]] || printf -v "$key" '%s' "$value"
	done <"$config"
fi
mount=${VFHEALTH_MOUNT:-/run/vfhealth}
deadline=${VFHEALTH_TIMEOUT:-10}
lock=${VFHEALTH_SLURM_LOCK:-/run/vfhealth-slurm-check.lock}
scontrol=${VFHEALTH_SLURM_SCONTROL:-scontrol}
node=${SLURMD_NODENAME:-${VFHEALTH_SLURM_NODE:-$(hostname -s)}}
[[ -z ${SLURM_CONF:-} ]] || export SLURM_CONF
prefix="vfhealth:"
# within slurmd's 60 s with the lock's 2 s and scontrol's 20 s
[[ $deadline =~ ^([1-9]|[12][0-9]|30)$ ]] || deadline=10

# ---- the node's VFs ----------------------------------------------------------

# cut_list MAX HEAD ITEM...: HEAD then the items joined by ", ", as many as
# fit in MAX bytes, then ", ..." for the rest.
cut_list() {
	local max=$1 text=$2 sep=": " i items
	shift 2
	items=("$@")
	for ((i = 0; i < ${#items[@]}; i++)); do
		local more=
		((i + 1 == ${#items[@]})) || more=", ..."
		if ((${#text} + ${#sep} + ${#items[i]} + ${#more} > max)); then
			text+="$sep..."
			break
		fi
		text+="$sep${items[i]}"
		sep=", "
	done
	printf '%s' "$text"
}

# check_vfhealth: why no VF can be placed here in $why (empty: fit), the
# mode in $mode.
check_vfhealth() {
	local tmp rc=0 kind rest n=0 out_n=0 gpu_n=0 vf reason g items=()
	local -A by_gpu=()
	why=
	mode=enforce
	umask 077
	# fd 9 stays open in the readers: one the kernel cannot kill keeps the
	# lock, so no second check queues behind it.
	if ! exec 9>>"$lock"; then
		why="cannot open the lock $lock"
		return
	fi
	if ! flock -w 2 9; then
		echo "vfhealth-slurm-check: an earlier check still waits for $mount"
		why="$mount not answering"
		return
	fi
	tmp=$(mktemp) || { why="no temporary file"; return; }
	# (in a subshell: bash's own "Killed" report goes nowhere)
	(timeout -s KILL "$deadline" "$BASH" "$0" --read "$mount" </dev/null >"$tmp" 2>&1) 2>/dev/null || rc=$?
	while read -r kind rest; do
		case $kind in
		unknown) why=$rest ;;
		mode) mode=$rest ;;
		vf) n=$((n + 1)) ;;
		out)
			out_n=$((out_n + 1))
			vf=${rest%% *} reason=${rest#* }
			case $reason in
			GPU*) by_gpu[$reason]=1 gpu_n=$((gpu_n + 1)) ;;
			*) items+=("$vf $reason") ;;
			esac
			;;
		esac
	done <"$tmp"
	rm -f -- "$tmp"
	if ((rc != 0)); then
		echo "vfhealth-slurm-check: $mount did not answer within ${deadline}s"
		why="$mount not answering"
	elif [[ -z $why ]] && ((n > 0 && out_n == n)); then
		# the GPUs first (one item covers their VFs), then each VF's own reason
		mapfile -t g < <(printf '%s\n' "${!by_gpu[@]}" | sort)
		[[ ${#by_gpu[@]} -gt 0 ]] || g=()
		why=$(cut_list 200 "all $n VFs out of service" "${g[@]}" "${items[@]}") ||
			why="all $n VFs out of service"
		# a GPU's drain is enforced in observe mode too
		((gpu_n < n)) || mode=enforce
		return
	fi
	[[ -z $why ]] || mode=enforce
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
if ! shown=$(timeout -s KILL 20 "$scontrol" show node "$node" 2>&1 9>&-); then
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
	if ! timeout -s KILL 20 "$scontrol" update NodeName="$node" State=DRAIN Reason="$prefix $why" 9>&-; then
		echo "vfhealth-slurm-check: cannot drain $node" >&2
		exit 2
	fi
	echo "vfhealth-slurm-check: drained $node: $prefix $why"
	exit 1
fi

if $drained && $ours; then
	if ! timeout -s KILL 20 "$scontrol" update NodeName="$node" State=RESUME 9>&-; then
		echo "vfhealth-slurm-check: cannot resume $node" >&2
		exit 2
	fi
	echo "vfhealth-slurm-check: resumed $node (was: $reason)"
fi
exit 0
