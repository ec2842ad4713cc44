#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Reports that find a commit under way join the next one instead of holding
# a FUSE worker through it (store/commit.c), and the loop's receiving
# thread queues them itself (fs/loop.c).  One FUSE worker: while one
# report's commit is held inside its fdatasync (tests/fs/stallsync.c) by
# one thread, three more reports on other VFs are sent, and an open of a
# file after them is served (the receiving thread read them first, and is
# free); none returns before its commit.  Once the sync is let go each
# succeeds with its own outcome, read back through its own open file, and
# the three were joined (vfhealth_store_reports_joined_total) and took one
# commit after the held one: handed to the one worker instead, busy with
# the held commit, each would have waited its turn and taken a commit of
# its own.  The log has each one's line.
# A write the receiving thread cannot serve without waiting is passed on to
# a worker: a success report, which joins nothing, is answered after the
# held commit (the worker's), while the receiving thread serves an open and
# lets a report on another VF join.
# Then the stop: a report joined behind a held commit when SIGTERM comes is
# committed and answered before the daemon unmounts (answered EIO when the
# notifier has stopped: durable, but not to be taken as seen), and the
# daemon exits 0 with no sanitizer report.
source "$(dirname "$0")/lib.sh"
require_fuse
gate=$T/gate
stall_syncs "$gate"
start_daemon --fuse-workers 1 --threshold 3

for v in 00.1 00.2 00.3 00.4 00.5 00.6 00.7 01.0 01.1; do mkdir "$MNT/0000:41:$v"; done
# Rendered by a worker: read only while no commit is held.
metric() { awk -v n="$1" '$1 == n { print $2 }' "$MNT/metrics"; }
held() { ls -l "/proc/$DAEMON_PID/fd" 2>/dev/null | grep -q -- "-> $gate\$"; }
# Hold the next commit: the FIFO's read end is the shim's, inside the
# daemon's fdatasync; ours is open read-write, so neither open blocks.
# Letting it go: no later sync stops (the FIFO is gone), and the held one
# reads its byte (also when the test fails, so that the daemon can stop).
hold_next() {
	mkfifo "$gate"
	exec 9<>"$gate"
}
let_go() { rm -f -- "$gate"; { printf x >&9; } 2>/dev/null || true; }
on_exit let_go
report() { /bin/echo "failed $1 2026-11-29T07:00:00Z $1 failed" >&"$2" 2>"$T/$1.out"; }
# in_request PID: the writer PID (its echo) waits in the kernel for the
# answer to a FUSE request, which the kernel queued for the daemon: it
# sleeps in fs/fuse's request_wait_answer(), or where a kernel that inlines
# it names the FUSE function around it (not in the inode's lock, which a
# write takes before it sends its request).
in_request() {
	local p
	for p in "$1" $(pgrep -P "$1"); do
		grep -Eq '^(request_wait_answer|.*fuse.*)$' "/proc/$p/wchan" 2>/dev/null && return 0
	done
	return 1
}
# read_past: an open and read through the mount, served by the receiving
# thread (every open is), which reads the kernel's requests in order: the
# ones queued before it were read and served or passed on first.
read_past() { assert_cat "$MNT/0000:41:00.7/quarantined" 0; }

assert_eq "$(metric vfhealth_store_reports_joined_total)" 0 "reports joined before any commit"
commits0=$(metric vfhealth_store_commits_total)
hold_next
exec 3<>"$MNT/0000:41:00.1/report" 4<>"$MNT/0000:41:00.2/report"
exec 5<>"$MNT/0000:41:00.3/report" 6<>"$MNT/0000:41:00.4/report"
report vm-a 3 &
writers=($!)
wait_for 10 "the first report's commit to be held in its sync" held
for i in 4 5 6; do
	report "vm-$i" "$i" &
	writers+=($!)
	wait_for 10 "report vm-$i to wait for its answer" in_request "$!"
done
read_past
for w in "${writers[@]}"; do
	process_running "$w" || fail "a report returned before its commit was durable"
done

let_go
exec 9>&-
for i in 0 1 2 3; do
	wait "${writers[$i]}" || fail "report $i failed: $(cat "$T"/vm-*.out)"
done
fd=3
for v in 1 2 3 4; do
	assert_eq "$("$VFTOOL" pread-fd "$fd")" "recorded failures=1 threshold=3" \
		"the outcome of 0000:41:00.$v's report, through its own open file"
	assert_cat "$MNT/0000:41:00.$v/tally" 1
	fd=$((fd + 1))
done
exec 3<&- 4<&- 5<&- 6<&-
assert_eq "$(metric vfhealth_store_reports_joined_total)" 3 "reports joined to the held commit"
assert_eq "$(($(metric vfhealth_store_commits_total) - commits0))" 2 \
	"commits for the held report and the three that joined it"
for vm in vm-a vm-4 vm-5 vm-6; do
	grep -q "failed $vm .*$vm failed" "$DAEMON_LOG" || fail "no log line for the report of $vm"
done
pass "the joined reports' log lines"

# Passed on: a success report joins nothing, so the receiving thread
# passes it to a worker, the one busy with the held commit; meanwhile it
# serves an open and lets a report on another VF join.
hold_next
exec 3<>"$MNT/0000:41:00.7/report" 4<>"$MNT/0000:41:01.0/report" 5<>"$MNT/0000:41:01.1/report"
report vm-g 3 &
first=$!
wait_for 10 "the first report's commit to be held in its sync" held
/bin/echo "ok vm-j -" >&5 2>"$T/vm-j.out" &
success=$!
wait_for 10 "the success report to wait for its answer" in_request "$success"
report vm-i 4 &
third=$!
wait_for 10 "the report on another VF to wait for its answer" in_request "$third"
read_past
for w in "$first" "$third" "$success"; do
	process_running "$w" || fail "a write returned before the held commit was let go"
done
let_go
exec 9>&-
for w in "$first" "$third" "$success"; do
	wait_until 10 process_gone "$w" || fail "a write was never answered"
done
wait "$first" || fail "the report that held the commit: $(cat "$T/vm-g.out")"
wait "$third" || fail "the report that joined: $(cat "$T/vm-i.out")"
wait "$success" || fail "the success report passed on: $(cat "$T/vm-j.out")"
assert_eq "$("$VFTOOL" pread-fd 4)" "recorded failures=1 threshold=3" \
	"the outcome of the report that joined"
assert_eq "$("$VFTOOL" pread-fd 5)" "cleared=0 rescinded=0" "the success report's outcome"
assert_eq "$(metric vfhealth_store_reports_joined_total)" 4 "reports joined"
exec 3<&- 4<&- 5<&-

# The stop, with a report joined behind a held commit.
hold_next
exec 3<>"$MNT/0000:41:00.5/report" 4<>"$MNT/0000:41:00.6/report"
report vm-e 3 &
held_writer=$!
wait_for 10 "the next report's commit to be held in its sync" held
report vm-f 4 &
joined_writer=$!
wait_for 10 "the report on another VF to wait for its answer" in_request "$joined_writer"
read_past
kill -TERM "$DAEMON_PID"
wait_for 10 "the daemon to begin its stop" grep -q "signal TERM: shutting down" "$DAEMON_LOG"
let_go
exec 9>&-
wait_until 60 process_gone "$DAEMON_PID" || fail "vfhealthd did not stop with a joined report owed"
rc=0
wait "$DAEMON_PID" || rc=$?
DAEMON_PID=
((rc == 0)) || fail "vfhealthd exited $rc on SIGTERM with a joined report owed"
check_sanitizers
wait_until 10 process_gone "$joined_writer" || fail "the joined report was never answered"
wait "$held_writer" || true
rc=0
wait "$joined_writer" || rc=$?
# answered: success, or EIO once the notifier has stopped; never left to
# the connection's abort (ENOTCONN) by an unmount that came first
case $(cat "$T/vm-f.out") in
"" | *"Input/output error"*) pass "the joined report was answered at the stop (exit $rc)" ;;
*) fail "the joined report's answer: $(cat "$T/vm-f.out")" ;;
esac
exec 3<&- 4<&-
is_mounted "$MNT" && fail "$MNT still mounted after the stop"

# ... and it was committed (joined, as the log of its answer says): durable
# across the restart.
start_daemon --threshold 3
assert_cat "$MNT/0000:41:00.6/tally" 1
assert_cat "$MNT/0000:41:00.5/tally" 1
stop_daemon
echo "ok"
