#!/usr/bin/env bash
# place.sh - pick a VF for an instance the way vfhealth means placement to:
# take the first line of MOUNT/allocatable (the VFs a claim may take now,
# best first: VFs of GPUs with no VF out of service, then the others, then
# those the breaker holds back; random among equals, drawn afresh for each
# open), claim it, and move on to the next line when vfhealthd says EBUSY
# (another placement took it, or it left service, since the list was read).
#
#   place.sh [--mount DIR] [--candidates FILE] [--agent EP] [--control PATH]
#            [--pid PID] INSTANCE
#
# The claim is the exclusive create of VF/assignments/INSTANCE, followed by
# one write of the attributes given (pid=, agent=, control=), as
# examples/vmm/vfhealth-claim.sh does.  Name the VMM, never this script or
# its shell (a claim whose pid dies is released as its VMM's crash):
# --pid the VMM's pid when it runs already; else --control its control
# socket, which the sentinel waits for (--control-grace after the claim,
# vfhealthd(8)), or neither, and complete the claim with pid= once the VMM
# runs.  --agent needs --pid or --control.
# --candidates FILE: the VFs to try, one per line, instead of reading
# allocatable (a scheduler's filtered copy of it; - for stdin).
# Prints the VF it claimed.  Exit: 0 claimed; 1 nothing could be claimed
# (none free, or vfhealthd failed closed: EIO); 2 usage or refused attributes.
set -euo pipefail

mount=/run/vfhealth
candidates=
attrs=
instance=
usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "place: $*" >&2; exit 2; }
while (($#)); do
	case $1 in
	--mount) mount=${2:?--mount needs a directory}; shift 2 ;;
	--candidates) candidates=${2:?--candidates needs a file}; shift 2 ;;
	--agent) attrs+="agent=${2:?--agent needs an endpoint}"$'\n'; shift 2 ;;
	--control) attrs+="control=${2:?--control needs a path}"$'\n'; shift 2 ;;
	--pid) attrs="pid=${2:?--pid needs a pid}"$'\n'$attrs; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	-*) die "unknown option: $1" ;;
	*) [[ -z $instance ]] || die "one INSTANCE only"; instance=$1; shift ;;
	esac
done
[[ -n $instance ]] || { usage >&2; exit 2; }

# One open, one order: the whole list is read before the first claim.
if [[ -z $candidates ]]; then
	if ! list=$(cat -- "$mount/allocatable" 2>&1); then
		echo "place: cannot read $mount/allocatable: ${list##*: }" >&2
		exit 1 # EIO: the store cannot say what is usable; place nothing
	fi
elif [[ $candidates == - ]]; then
	list=$(cat)
else
	list=$(cat -- "$candidates")
fi

while IFS= read -r vf; do
	[[ -n $vf ]] || continue
	file=$mount/$vf/assignments/$instance
	# noclobber: ">" is an O_EXCL create, so an existing claim is never
	# reused.  The attributes go through that same open file: the claim is
	# made whole at its close, or not at all (vfhealth(5)).
	if ! err=$( { set -o noclobber; printf '%s' "$attrs" > "$file"; } 2>&1 ); then
		case $err in
		*"Device or resource busy"*) echo "busy   $vf" >&2; continue ;;
		*"No such file or directory"*) echo "gone   $vf" >&2; continue ;;
		*"write error"*) die "$vf: attributes refused: ${err##*: }; nothing claimed" ;;
		*) echo "place: cannot claim $vf: ${err##*: }" >&2; exit 1 ;;
		esac
	fi
	# A claim refused as a whole fails only the close, which the shell does
	# not report: it is not there to read.
	[[ -e $file ]] || die "$vf: claim refused (vfhealthd's log says why)"
	echo "$vf"
	exit 0
done <<<"$list"
echo "place: no VF could be claimed for $instance" >&2
exit 1
