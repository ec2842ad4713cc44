#!/bin/sh
# SPDX-License-Identifier: MIT
# vfhealth-npd-check.sh - node-problem-detector's custom plugin for vfhealth
# (vfhealth-monitor.json names it, once per condition): this node's VFs out
# of service, in the plugin contract's exit status and at most 80 bytes of
# stdout.  A VF is out of service when it is quarantined, held, held back
# by the breaker, or on a GPU that is draining, drained, recovering or
# failed; a VF claimed by a running VM is in service.
#
#   vfhealth-npd-check.sh          condition VGPUVFOutOfService
#     exit 0  "no VF out of service"; in observe mode also when VFs are out
#             only by rules enforcement would apply ("observe mode:
#             enforcing would refuse ..."; a GPU's drain applies in observe
#             mode too)
#     exit 1  "3 VFs out of service: GPU 0000:41:00.0 drained, 0000:42:00.4 held"
#     exit 2  Unknown: no vfhealth mount, a mount that does not answer, or
#             its store unavailable (placement is refused meanwhile)
#   vfhealth-npd-check.sh unfit    condition VGPUNodeUnfit
#     exit 0  "not every VF out of service" (in observe mode as above)
#     exit 1  every VF out of service ("all 4 VFs out of service: ..."), or
#             the state unknown as above (no VF can be placed)
#
# Every read of the mount runs in one process group that is killed after
# VFHEALTH_TIMEOUT seconds (default 3, inside the rule's 5 s; NPD itself
# kills only on its own timeout and then waits for the plugin's output,
# which a reader stuck in the kernel would hold): the readers write to a
# file, never to NPD's pipes.  A lock (VFHEALTH_NPD_LOCK, default
# /run/vfhealth-npd-check.lock, in a directory only root writes) lets one
# check run at a time; a reader the kernel cannot kill keeps it, and later
# checks report the mount as not answering instead of piling up.
#
# VFHEALTH_MOUNT names the mount (default /run/vfhealth); node-problem-
# detector's container must see it (a hostPath volume with
# mountPropagation: HostToContainer) and have cat, ls, timeout, flock.
set -u
PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C
export PATH LC_ALL

# read_mount MOUNT (run as `check --read MOUNT` under the deadline): as
# vfhealth-slurm-check.sh's: `unknown WHY`, or `mode MODE`, `vf VF` per
# registered VF, `out VF WHY` per VF out of service.
read_mount() {
	m=$1
	v=$(cat -- "$m/status" 2>&1) || { echo "unknown no vfhealth at $m: ${v##*: }"; return; }
	[ "$v" = ok ] || { echo "unknown vfhealth store $v"; return; }
	mode=$(cat -- "$m/mode" 2>&1) || { echo "unknown no vfhealth at $m: ${mode##*: }"; return; }
	v=$(cat -- "$m/quarantined" 2>&1) || { echo "unknown vfhealth store unavailable: ${v##*: }"; return; }
	own=$NL
	for vf in $v; do
		st=$(cat -- "$m/$vf/state" 2>&1) || st=quarantined
		[ "$st" = held ] || st=quarantined
		own="$own$vf $st$NL"
	done
	v=$(cat -- "$m/held_back" 2>&1) || { echo "unknown vfhealth store unavailable: ${v##*: }"; return; }
	for vf in $v; do own="$own$vf held back$NL"; done
	v=$(ls -1 -- "$m/gpus" 2>&1) || { echo "unknown no vfhealth at $m: ${v##*: }"; return; }
	gpu=$NL
	for g in $v; do
		# (a GPU whose last VF left since the listing is gone: no VF of it counts)
		if ! st=$(cat -- "$m/gpus/$g/state" 2>&1); then
			case $st in *"No such file or directory") continue ;; esac
			echo "unknown vfhealth store unavailable: ${st##*: }"
			return
		fi
		[ "$st" = serving ] && continue
		if ! vfs=$(cat -- "$m/gpus/$g/vfs" 2>&1); then
			case $vfs in *"No such file or directory") continue ;; esac
			echo "unknown vfhealth store unavailable: ${vfs##*: }"
			return
		fi
		for vf in $vfs; do gpu="$gpu$vf GPU $g $st$NL"; done
	done
	v=$(ls -1 -- "$m" 2>&1) || { echo "unknown no vfhealth at $m: ${v##*: }"; return; }
	echo "mode $mode"
	for vf in $v; do
		case $vf in
		[0-9a-f][0-9a-f][0-9a-f][0-9a-f]:[0-9a-f][0-9a-f]:[0-9a-f][0-9a-f].[0-7]) ;;
		*) continue ;;
		esac
		echo "vf $vf"
		for list in "$gpu" "$own"; do
			case $list in
			*"$NL$vf "*)
				r=${list#*"$NL$vf "}
				echo "out $vf ${r%%"$NL"*}"
				break
				;;
			esac
		done
	done
}

NL='
'
if [ "${1:-}" = --read ]; then
	read_mount "$2"
	exit 0
fi

mount=${VFHEALTH_MOUNT:-/run/vfhealth}
deadline=${VFHEALTH_TIMEOUT:-3}
lock=${VFHEALTH_NPD_LOCK:-/run/vfhealth-npd-check.lock}
case $deadline in [1-9] | [1-9][0-9]) ;; *) deadline=3 ;; esac
unfit=false
[ "${1:-}" = unfit ] && unfit=true
max=80

# say TEXT: TEXT cut to the contract's max_output_length bytes.
say() {
	printf '%s\n' "$1" | cut -b "1-$max"
}
# unknown WHY: the state is unknown: Unknown, or for `unfit` a problem.
unknown() {
	say "$1"
	if $unfit; then exit 1; fi
	exit 2
}
# cut_list HEAD ITEMS (one per line): HEAD, then the items joined by ", "
# as far as they fit in $max bytes, then ", ..." for the rest; in $line.
cut_list() {
	line=$1
	sep=": "
	left=$(printf '%s' "$2" | grep -c .)
	old_ifs=$IFS
	IFS=$NL
	for item in $2; do
		left=$((left - 1))
		more=
		[ "$left" -eq 0 ] || more=", ..."
		if [ $((${#line} + ${#sep} + ${#item} + ${#more})) -gt "$max" ]; then
			line="$line$sep..."
			break
		fi
		line="$line$sep$item"
		sep=", "
	done
	IFS=$old_ifs
}

umask 077
# fd 9 stays open in the readers: one the kernel cannot kill keeps the lock.
exec 9>>"$lock" || unknown "vfhealth check: cannot open $lock"
flock -w 1 9 || unknown "vfhealth at $mount not answering (an earlier check waits)"
tmp=$(mktemp) || unknown "vfhealth check: no temporary file"
rc=0
timeout -s KILL "$deadline" /bin/sh "$0" --read "$mount" </dev/null >"$tmp" 2>&1 || rc=$?
exec 9>&-
result=$(cat -- "$tmp")
rm -f -- "$tmp"
[ "$rc" -eq 0 ] || unknown "vfhealth at $mount not answering within ${deadline}s"

mode=enforce n=0 n_out=0 n_real=0 gpus='' vfs_own=''
old_ifs=$IFS
IFS=$NL
for l in $result; do
	IFS=$old_ifs
	kind=${l%% *} rest=${l#* }
	case $kind in
	unknown) unknown "$rest" ;;
	mode) mode=$rest ;;
	vf) n=$((n + 1)) ;;
	out)
		n_out=$((n_out + 1))
		vf=${rest%% *} why=${rest#* }
		case $why in
		GPU*)
			# a GPU's drain is enforced in observe mode too; one item per GPU
			n_real=$((n_real + 1))
			case "$NL$gpus" in *"$NL$why$NL"*) ;; *) gpus="$gpus$why$NL" ;; esac
			;;
		*) vfs_own="$vfs_own$vf $why$NL" ;;
		esac
		;;
	esac
	IFS=$NL
done
IFS=$old_ifs
[ "$mode" = observe ] || n_real=$n_out
items="$gpus$vfs_own"
real=$items
[ "$mode" = observe ] && real=$gpus

s=s
[ "$n_real" -ne 1 ] || s=
if $unfit; then
	if [ "$n" -gt 0 ] && [ "$n_real" -eq "$n" ]; then
		cut_list "all $n VFs out of service" "$real"
		say "$line"
		exit 1
	fi
	if [ "$n" -gt 0 ] && [ "$n_out" -eq "$n" ]; then
		cut_list "observe mode: enforcing would refuse all $n VFs" "$items"
		say "$line"
		exit 0
	fi
	say "not every VF out of service"
	exit 0
fi
if [ "$n_real" -gt 0 ]; then
	cut_list "$n_real VF$s out of service" "$real"
	say "$line"
	exit 1
fi
if [ "$n_out" -gt 0 ]; then
	s=s
	[ "$n_out" -ne 1 ] || s=
	cut_list "observe mode: enforcing would refuse $n_out VF$s" "$items"
	say "$line"
	exit 0
fi
if [ "$mode" = observe ]; then
	say "no VF out of service (observe mode)"
else
	say "no VF out of service"
fi
exit 0
