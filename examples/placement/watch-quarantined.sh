#!/usr/bin/env bash
# watch-quarantined.sh - a placement watcher: keeps the set of quarantined VFs
# current by waiting for inotify events on /run/vfhealth/quarantined
# (inotifywait, from inotify-tools) and re-reading the file on each one.
#
#   watch-quarantined.sh [--mount DIR]
#
# Prints one line whenever the set changes, the first one at start:
#   quarantined 0000:41:00.4 0000:41:00.5     (the whole set, sorted; may be empty)
#   unavailable: cannot read DIR/quarantined  (fail closed: place nothing)
# Replace report() with what your placement code does with the set.
#
# Exits non-zero when the watch ends (vfhealthd stopped, the mount went away):
# run it under a supervisor that restarts it, and treat "no watcher" as
# "place nothing", like unavailable.
set -euo pipefail

mount=/run/vfhealth
while (($#)); do
	case $1 in
	--mount) mount=${2:?--mount needs a directory}; shift 2 ;;
	-h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "watch-quarantined: unknown argument: $1" >&2; exit 2 ;;
	esac
done
file=$mount/quarantined
[[ -r $file ]] || { echo "watch-quarantined: $file is not readable (is vfhealthd running?)" >&2; exit 1; }

last=
report() {
	# The file is the whole answer, one VF per line: read it again on every
	# event instead of patching a cached copy, so nothing is ever missed.
	local now
	if now=$(cat -- "$file" 2>/dev/null); then
		now="quarantined${now:+ ${now//$'\n'/ }}"
	else
		now="unavailable: cannot read $file"
	fi
	[[ $now == "$last" ]] && return 0
	last=$now
	printf '%s\n' "$now"
}

# Establish the watch before the first read, so that a change made between
# the read and the watch is not lost: wait for inotifywait's "Watches
# established." before reading.
coproc WATCH { exec inotifywait -m -e modify,close_write,attrib,delete_self,unmount \
	--format '%e' -- "$file" 2>&1; }
# shellcheck disable=SC2153 # WATCH_PID is set by coproc
watch_pid=$WATCH_PID
trap 'kill "$watch_pid" 2>/dev/null || true' EXIT
established=false
while IFS= read -r line <&"${WATCH[0]}"; do
	case $line in
	"Setting up watches."*) continue ;;
	"Watches established."*) established=true; break ;;
	*) echo "watch-quarantined: inotifywait: $line" >&2; break ;;
	esac
done
$established || exit 1
report

while IFS= read -r event <&"${WATCH[0]}"; do
	case $event in
	*DELETE_SELF*|*UNMOUNT*|*IGNORED*)
		echo "watch-quarantined: $file went away ($event)" >&2
		exit 1 ;;
	esac
	report
done
echo "watch-quarantined: the watch on $file ended" >&2
exit 1
