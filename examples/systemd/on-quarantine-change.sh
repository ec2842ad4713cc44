#!/usr/bin/env bash
# on-quarantine-change.sh - what vfhealth-quarantine.service runs when the set
# of quarantined VFs changes: compare the set with the one seen last time,
# log each difference, and run every executable in the hooks directory (in
# name order) as `HOOK quarantined VF` or `HOOK cleared VF`.
#
#   on-quarantine-change.sh [--mount DIR] [--state FILE] [--hooks DIR]
#
# Defaults: /run/vfhealth, /run/vfhealth-hook/quarantined, /etc/vfhealth/quarantine.d.
# Runs for nothing when the set did not change (path units may fire more
# than once per change).  When the store is unavailable, nothing is compared
# and the state is kept, so no VF is reported cleared by mistake; exit 1.
# A failing hook is logged and the others still run; exit 1.
set -euo pipefail

mount=/run/vfhealth
state=/run/vfhealth-hook/quarantined
hooks=/etc/vfhealth/quarantine.d
while (($#)); do
	case $1 in
	--mount) mount=${2:?}; shift 2 ;;
	--state) state=${2:?}; shift 2 ;;
	--hooks) hooks=${2:?}; shift 2 ;;
	-h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "on-quarantine-change: unknown argument: $1" >&2; exit 2 ;;
	esac
done

if ! now=$(cat -- "$mount/quarantined"); then
	echo "on-quarantine-change: cannot read $mount/quarantined; keeping the last known set" >&2
	exit 1
fi
before=$(cat -- "$state" 2>/dev/null || true)

rc=0
run_hooks() { # EVENT VF
	local hook
	echo "vfhealth: $2 $1"
	[[ -d $hooks ]] || return 0
	for hook in "$hooks"/*; do
		[[ -f $hook && -x $hook ]] || continue
		"$hook" "$1" "$2" || { echo "on-quarantine-change: hook $hook $1 $2 failed" >&2; rc=1; }
	done
}

# comm needs sorted input; quarantined is sorted, the state file is a copy.
while IFS= read -r vf; do
	[[ -n $vf ]] && run_hooks quarantined "$vf"
done < <(comm -13 <(printf '%s\n' "$before" | sort) <(printf '%s\n' "$now" | sort))
while IFS= read -r vf; do
	[[ -n $vf ]] && run_hooks cleared "$vf"
done < <(comm -23 <(printf '%s\n' "$before" | sort) <(printf '%s\n' "$now" | sort))

# Replace the state atomically, so that a crash never leaves half a set.
printf '%s\n' "$now" > "$state.tmp"
mv -f -- "$state.tmp" "$state"
exit "$rc"
