#!/bin/sh
# SPDX-License-Identifier: MIT
# vfhealth-npd-check.sh - node-problem-detector's custom plugin for vfhealth
# (vfhealth-monitor.json names it): whether this node has VFs out of
# service, in the plugin contract's exit status and at most 80 bytes of
# stdout.
#
#   exit 0  OK       "no VF out of service"; in observe mode also when VFs
#                    are out of service, saying what enforcement would do
#   exit 1  NonOK    "3 VFs out of service: 0000:41:00.4 ... (GPU 0000:41:00.0)"
#   exit 2  Unknown  no vfhealth mount, a mount that does not answer, or
#                    its store unavailable (placement is refused meanwhile)
#
# VFHEALTH_MOUNT names the mount (default /run/vfhealth); node-problem-
# detector's container must see it (a hostPath volume with
# mountPropagation: HostToContainer).
set -u
mount=${VFHEALTH_MOUNT:-/run/vfhealth}
max=80

# say TEXT: TEXT cut to the contract's max_output_length bytes.
say() {
	printf '%s\n' "$1" | cut -b "1-$max"
}
unknown() {
	say "$1"
	exit 2
}
# read_file FILE: its content in $content; on failure the reason (the
# strerror text cat printed) in $why.
read_file() {
	if content=$(cat -- "$1" 2>&1); then
		return 0
	fi
	why=${content##*: }
	return 1
}

read_file "$mount/status" || unknown "no vfhealth at $mount: $why"
[ "$content" = ok ] || unknown "vfhealth store $content"
read_file "$mount/quarantined" || unknown "vfhealth store unavailable: $why"
out=$content
read_file "$mount/mode" || unknown "vfhealth at $mount: $why"
mode=$content

n=0
vfs=
parents=
np=0
for vf in $out; do
	n=$((n + 1))
	vfs="$vfs $vf"
	parent=$(cat -- "$mount/$vf/parent" 2>/dev/null) || parent=
	case " $parents " in
	*" $parent "*) ;;
	*) [ -z "$parent" ] || { parents="$parents $parent"; np=$((np + 1)); } ;;
	esac
done

if [ "$n" -eq 0 ]; then
	if [ "$mode" = observe ]; then
		say "no VF out of service (observe mode)"
	else
		say "no VF out of service"
	fi
	exit 0
fi

s=s
[ "$n" -gt 1 ] || s=
if [ "$mode" = observe ]; then
	line="observe mode: enforcing would refuse $n VF$s:"
else
	line="$n VF$s out of service:"
fi
gpus=
if [ "$np" -eq 1 ]; then
	gpus=" (GPU${parents})"
elif [ "$np" -gt 1 ]; then
	gpus=" (GPUs${parents})"
	[ $((${#line} + 14 + 4 + ${#gpus})) -le "$max" ] || gpus=" ($np GPUs)"
fi
# As many VFs as fit, then "..." for the rest, then their GPUs.
shown=0
for vf in $vfs; do
	more=
	[ $((n - shown - 1)) -eq 0 ] || more=" ..."
	[ $((${#line} + 1 + ${#vf} + ${#more} + ${#gpus})) -le "$max" ] || break
	line="$line $vf"
	shown=$((shown + 1))
done
[ "$shown" -eq "$n" ] || line="$line ..."
say "$line$gpus"
[ "$mode" = observe ] && exit 0
exit 1
