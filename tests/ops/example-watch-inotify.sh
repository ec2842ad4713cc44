#!/usr/bin/env bash
# example-watch-inotify.sh - examples/placement/watch-quarantined.sh against a
# real vfhealthd: it prints the initial (empty) set, then the new set after a
# manual quarantine, after a quarantine by two failed assignments and after
# an operator clear, each exactly once; and it exits non-zero when the mount
# goes away.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse
require_cmd inotifywait:inotify-tools

mnt=$MNT
start_daemon --no-sentinel
mkdir "$mnt/0000:41:00.4" "$mnt/0000:41:00.5" "$mnt/0000:41:00.6"

out=$T/watch.out
"$source_root/examples/placement/watch-quarantined.sh" --mount "$mnt" >"$out" 2>"$T/watch.err" &
watcher=$!
BG_PIDS+=("$watcher")
wait_for_line "$out" "quarantined" 10

echo 1 > "$mnt/0000:41:00.5/quarantined"
wait_for_line "$out" "quarantined 0000:41:00.5" 10

report_failed "$mnt" 0000:41:00.4 vm-a
report_failed "$mnt" 0000:41:00.4 vm-b
wait_for_line "$out" "quarantined 0000:41:00.4 0000:41:00.5" 10

echo 0 > "$mnt/0000:41:00.5/quarantined"
wait_for_line "$out" "quarantined 0000:41:00.4" 10

# A change that does not touch the set (a failure on a third VF, below the
# threshold) prints nothing; then the whole sequence is exactly what we saw.
report_failed "$mnt" 0000:41:00.6 vm-c
echo 1 > "$mnt/0000:41:00.6/quarantined"
wait_for_line "$out" "quarantined 0000:41:00.4 0000:41:00.6" 10
expected=$'quarantined\nquarantined 0000:41:00.5\nquarantined 0000:41:00.4 0000:41:00.5\nquarantined 0000:41:00.4\nquarantined 0000:41:00.4 0000:41:00.6'
[[ $(cat "$out") == "$expected" ]] || fail "watcher printed:"$'\n'"$(cat "$out")"

# The mount goes away: the watcher must end with a failure, not hang.
stop_daemon
rc=0
wait_for 10 "the watcher to exit" bash -c "! kill -0 $watcher 2>/dev/null"
wait "$watcher" || rc=$?
((rc != 0)) || fail "the watcher exited 0 after the mount went away"
echo "inotify watcher OK"
