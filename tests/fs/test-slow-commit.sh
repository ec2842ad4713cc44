#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A commit that does not end never holds up placement's reads: while a
# report's commit is held inside its fdatasync (tests/fs/stallsync.c
# preloaded into the daemon), with one FUSE worker, which that write
# occupies, `cat` of VF/quarantined, the top-level quarantined and
# allocatable, a VF's state, `ls -l` and `stat` are all answered, by the
# loop's receiving thread (fs/loop.c), and show what was committed before
# (the held report is not there yet), and so is a read of a report file's
# outcome (an outcome is a copy: it never waits for a commit, not even one
# through the same open file); once the sync is let go, the write
# succeeds and the report shows.  The reads have a deadline: a read queued
# behind the commit would wait for a byte this script writes only after
# them.  And the receiving thread's look for the next request is bounded:
# while the commit is held, and once the daemon is idle after it, every
# thread of the daemon sleeps (a receiver that kept reading /dev/fuse would
# stay runnable, R, for good).
source "$(dirname "$0")/lib.sh"
require_fuse
gate=$T/gate
stall_syncs "$gate"
start_daemon --fuse-workers 1 --threshold 3

V=$MNT/0000:41:00.1 W=$MNT/0000:41:00.2
mkdir "$V" "$W"
put "$W/quarantined" 1
assert_cat "$V/state" ok

# Hold the next commit: the FIFO's read end is the shim's, inside the
# daemon's fdatasync; our end is open read-write, so neither open blocks.
# Letting it go: no later sync stops (the FIFO is gone), and the held one
# reads its byte (also when the test fails, so that the daemon can stop).
mkfifo "$gate"
exec 9<>"$gate"
let_go() { rm -f -- "$gate"; { printf x >&9; } 2>/dev/null || true; }
# threads_asleep: no thread of the daemon is runnable (field 3 of its
# stat, after the command name in parentheses)
threads_asleep() {
	local stat
	for stat in /proc/"$DAEMON_PID"/task/*/stat; do
		[[ $(sed 's/.*) //' "$stat" 2>/dev/null | cut -d' ' -f1) != R ]] || return 1
	done
}
on_exit let_go
# The report goes through descriptor 8, which the reads below share: the
# same open file as the held write.
exec 8<>"$V/report"
/bin/echo "failed vm-1 2026-11-29T07:00:00Z held" >&8 2>"$T/writer.out" &
writer=$!
held() { ls -l "/proc/$DAEMON_PID/fd" 2>/dev/null | grep -q -- "-> $gate\$"; }
wait_for 10 "the report's commit to be held in its sync" held

# The reads, in the background, each line what one returned; the deadline
# is only how long a failing run waits (a read queued behind the commit
# cannot even be killed: it waits for the byte written after this).
(
	for i in 1 2 3; do
		for f in 0000:41:00.2/quarantined 0000:41:00.1/quarantined quarantined 0000:41:00.1/state; do
			echo "$f $(cat -- "$MNT/$f")"
		done
	done
	echo "report [$(cat -- "$W/report")]"
	echo "held report's open file [$("$VFTOOL" pread-fd 8)]"
	grep -qx 0000:41:00.1 "$MNT/allocatable" && echo "allocatable lists 0000:41:00.1"
	ls -l "$MNT" >/dev/null && echo "ls -l"
	stat "$V/state" "$W/quarantined" >/dev/null && echo "stat"
	echo "done"
) >"$T/reads" 2>&1 &
wait_for 10 "placement's reads to be answered while a commit is held" grep -qx done "$T/reads"
process_running "$writer" || fail "the report returned while its commit was held: $(cat "$T/writer.out")"
expected=""
for i in 1 2 3; do
	# the held report is not committed: 0000:41:00.1 is not failing yet
	expected+="0000:41:00.2/quarantined 1"$'\n'"0000:41:00.1/quarantined 0"$'\n'
	expected+="quarantined 0000:41:00.2"$'\n'"0000:41:00.1/state ok"$'\n'
done
expected+="report []"$'\n'"held report's open file []"$'\n'"allocatable lists 0000:41:00.1"$'\n'"ls -l"$'\n'"stat"$'\n'"done"
assert_eq "$(cat "$T/reads")" "$expected" "what the reads returned while a commit was held"
wait_for 10 "every thread to sleep while the commit is held" threads_asleep

let_go
exec 9>&-
wait "$writer" || fail "the held report failed: $(cat "$T/writer.out")"
assert_eq "$("$VFTOOL" pread-fd 8)" "recorded failures=1 threshold=3" "the held report's outcome"
exec 8<&-
assert_cat "$V/state" failing
assert_cat "$V/tally" 1
wait_for 10 "every thread to sleep once the daemon is idle" threads_asleep

stop_daemon
echo "ok"
