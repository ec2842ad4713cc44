#!/usr/bin/env bash
# vfhealth-claim.sh - the VMM side of an assignment: claim a VF through
# /run/vfhealth/VF/assignments/ before handing it to a VM, release it when
# the VM is gone.  Use it as a command or source it for the two functions.
#
#   vfhealth-claim.sh claim VF INSTANCE [--agent EP] [--control PATH] [--pid PID]
#   vfhealth-claim.sh release VF INSTANCE
#   MOUNT=/run/vfhealth (environment) names the mount.
#
# claim creates VF/assignments/INSTANCE exclusively; vfhealthd refuses with
# EBUSY when the VF is quarantined or held by another instance (do not start
# the VM on it), EEXIST when INSTANCE already holds it.  It then writes the
# attributes the sentinel needs to ask the guest agent:
#   agent=EP       where the agent answers (vsock:CID[:PORT], hvsock:PATH[:PORT])
#   control=PATH   the VMM's control socket: while it exists the VM is alive
#   pid=PID        the VMM process (its start time is recorded with it)
# and prints the claim as vfhealthd stored it, claimed_at (the assignment's
# identity, stamped at create) included.
# release removes the file; the claim moves to the store's history.
# Exit 0 on success, 1 when vfhealthd refused (the reason on stderr), 2 usage.

MOUNT=${MOUNT:-/run/vfhealth}

# vfhealth_claim VF INSTANCE [--agent EP] [--control PATH] [--pid PID]
vfhealth_claim() {
	local vf=${1:?VF} instance=${2:?INSTANCE} attrs='' err
	shift 2
	while (($#)); do
		case $1 in
		--agent) attrs+="agent=${2:?}"$'\n'; shift 2 ;;
		--control) attrs+="control=${2:?}"$'\n'; shift 2 ;;
		--pid) attrs+="pid=${2:?}"$'\n'; shift 2 ;;
		*) echo "vfhealth_claim: unknown option $1" >&2; return 2 ;;
		esac
	done
	local file=$MOUNT/$vf/assignments/$instance
	[[ -d $MOUNT/$vf ]] || { echo "vfhealth_claim: $vf is not registered with vfhealthd" >&2; return 1; }
	# vfhealthd takes one write(2) at offset 0 as one whole command.
	((${#attrs} <= 4096)) || { echo "vfhealth_claim: attributes too long" >&2; return 2; }
	# noclobber makes ">" an O_EXCL create: the create is the claim, and it
	# fails instead of silently taking over someone else's assignment.
	if ! err=$( { set -o noclobber; : > "$file"; } 2>&1 ); then
		# bash says this itself when the file exists: EEXIST.
		[[ $err == *"cannot overwrite existing file"* ]] && err="File exists ($instance already holds $vf)"
		echo "vfhealth_claim: cannot claim $vf for $instance: ${err##*: }" >&2
		return 1
	fi
	[[ -n $attrs ]] || { cat -- "$file"; return 0; }
	# All attributes in one write(2) (bash's printf writes line by line; dd
	# with iflag=fullblock collects them first), through a fresh open at
	# offset 0, without O_TRUNC.
	if ! err=$(printf '%s' "$attrs" |
		   dd of="$file" bs=4096 count=1 iflag=fullblock conv=notrunc status=none 2>&1); then
		# The claim exists but is unusable for the sentinel: give it back.
		echo "vfhealth_claim: $vf: attributes refused: ${err##*: }; releasing" >&2
		rm -f -- "$file"
		return 1
	fi
	cat -- "$file"
}

# vfhealth_release VF INSTANCE
vfhealth_release() {
	local vf=${1:?VF} instance=${2:?INSTANCE} err
	if ! err=$(rm -- "$MOUNT/$vf/assignments/$instance" 2>&1); then
		echo "vfhealth_release: cannot release $vf for $instance: ${err##*: }" >&2
		return 1
	fi
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	set -euo pipefail
	case ${1:-} in
	claim) shift; vfhealth_claim "$@" ;;
	release) shift; vfhealth_release "$@" ;;
	*) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
fi
