#!/usr/bin/env bash
# vfhealth-claim.sh - the VMM side of an assignment: claim a VF through
# /run/vfhealth/VF/assignments/ before handing it to a VM, release it when
# the VM is gone.  Use it as a command or source it for the two functions.
#
#   vfhealth-claim.sh claim VF INSTANCE [--agent EP] [--control PATH] [--pid PID]
#   vfhealth-claim.sh release VF INSTANCE [CLAIMED_AT]
#   MOUNT=/run/vfhealth (environment) names the mount.
#
# claim creates VF/assignments/INSTANCE exclusively; vfhealthd refuses with
# EBUSY when the VF is quarantined or held by another instance (do not start
# the VM on it), EEXIST when INSTANCE already holds it.  Through the same
# open file it writes the attributes the sentinel needs to ask the guest
# agent, committed whole when the file is closed, or not at all:
#   agent=EP       where the agent answers (vsock:CID[:PORT], hvsock:PATH[:PORT])
#   control=PATH   the VMM's control socket: while it exists the VM is alive
#   pid=PID        the VMM process (its start time is recorded with it)
# --agent needs --pid and/or --control: then the claim is watched (polled).
# Without --agent the claim only excludes the VF (a guest without the agent).
# It prints the claim as vfhealthd stored it, claimed_at (the assignment's
# identity, stamped at create) included.
# release, once the VMM is gone, releases that assignment (CLAIMED_AT, by
# default the one the file shows) and nothing newer; the claim moves to the
# store's history.  Releasing one already released succeeds again.
# Exit 0 on success, 1 when vfhealthd refused (the reason on stderr), 2 usage.

MOUNT=${MOUNT:-/run/vfhealth}

# vfhealth_claim VF INSTANCE [--agent EP] [--control PATH] [--pid PID]
vfhealth_claim() {
	local vf=${1:?VF} instance=${2:?INSTANCE} attrs='' err why
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
	((${#attrs} <= 4096)) || { echo "vfhealth_claim: attributes too long" >&2; return 2; }
	# noclobber makes ">" an O_EXCL create: the create reserves the VF, and
	# it fails instead of silently taking over someone else's assignment.
	# The lines written through that open file are committed when it is
	# closed; a refused line fails its write and leaves no claim.
	if ! err=$( { set -o noclobber; printf '%s' "$attrs" > "$file"; } 2>&1 ); then
		case $err in
		# bash says this itself when the file exists: EEXIST.
		*"cannot overwrite existing file"*) why="File exists ($instance already holds $vf)" ;;
		*"write error"*) why="attributes refused: ${err##*: }" ;;
		*) why=${err##*: } ;;
		esac
		echo "vfhealth_claim: cannot claim $vf for $instance: $why" >&2
		return 1
	fi
	# A claim refused as a whole (--agent without --pid or --control) fails
	# only the close, which the shell does not report: read it back.
	if ! cat -- "$file" 2>/dev/null; then
		echo "vfhealth_claim: cannot claim $vf for $instance: claim refused (vfhealthd's log says why)" >&2
		return 1
	fi
}

# vfhealth_release VF INSTANCE [CLAIMED_AT]
vfhealth_release() {
	local vf=${1:?VF} instance=${2:?INSTANCE} at=${3:-} out
	local file=$MOUNT/$vf/assignments/$instance
	if [[ -z $at ]]; then
		at=$(sed -n 's/^claimed_at=//p' -- "$file" 2>/dev/null) || true
		[[ -n $at ]] || { echo "vfhealth_release: cannot release $vf for $instance: no claim" >&2; return 1; }
	fi
	# Staged through one open file and committed when echo's descriptor
	# closes; the outcome is read back through the same open file.
	out=$( { exec 3<>"$file" && echo "release=$at" >&3 && cat <&3; } 2>&1 ) || true
	case $out in
	"released "* | "already released "*) ;;
	*)
		echo "vfhealth_release: cannot release $vf for $instance: ${out#refused }" >&2
		return 1
		;;
	esac
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	set -euo pipefail
	case ${1:-} in
	claim) shift; vfhealth_claim "$@" ;;
	release) shift; vfhealth_release "$@" ;;
	*) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
fi
