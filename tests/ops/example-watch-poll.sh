#!/usr/bin/env bash
# example-watch-poll.sh - examples/placement/watch_quarantined.py (poll(2)
# with POLLPRI on the file, sysfs-style) against a real vfhealthd: it prints
# the initial set, wakes on a quarantine and on a clear without any timeout
# of its own, and exits after the two changes it was asked for.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse
require_cmd python3

mnt=$MNT
start_daemon --no-sentinel
mkdir "$mnt/0000:41:00.4" "$mnt/0000:41:00.5"
echo 1 > "$mnt/0000:41:00.5/quarantined"

out=$T/watch.out
python3 "$source_root/examples/placement/watch_quarantined.py" --mount "$mnt" --changes 2 \
	>"$out" 2>"$T/watch.err" &
watcher=$!
BG_PIDS+=("$watcher")
wait_for_line "$out" "quarantined 0000:41:00.5" 10

report_failed "$mnt" 0000:41:00.4 vm-a
report_failed "$mnt" 0000:41:00.4 vm-b
wait_for_line "$out" "quarantined 0000:41:00.4 0000:41:00.5" 10

echo 0 > "$mnt/0000:41:00.4/quarantined"
wait_for 10 "the watcher to exit after two changes" bash -c "! kill -0 $watcher 2>/dev/null"
wait "$watcher" || fail "the watcher failed: $(cat "$T/watch.err")"
expected=$'quarantined 0000:41:00.5\nquarantined 0000:41:00.4 0000:41:00.5\nquarantined 0000:41:00.5'
[[ $(cat "$out") == "$expected" ]] || fail "watcher printed:"$'\n'"$(cat "$out")"

# The module works as a library too: wait() returns the new set.  A change
# made after the read and before poll() is still reported (the read records
# what the open file has seen), so "armed" is the only synchronization.
python3 - "$source_root/examples/placement" "$mnt" >"$T/lib.out" <<'PY' &
import sys
sys.path.insert(0, sys.argv[1])
from watch_quarantined import QuarantineWatcher
w = QuarantineWatcher(sys.argv[2])
assert w.read() == frozenset({"0000:41:00.5"}), w.read()
print("armed", flush=True)
got = w.wait(10000)
assert got == frozenset(), got
PY
lib=$!
wait_for_line "$T/lib.out" armed 10
echo 0 > "$mnt/0000:41:00.5/quarantined"
wait "$lib" || fail "QuarantineWatcher.wait() did not return the new set"
echo "poll watcher OK"
