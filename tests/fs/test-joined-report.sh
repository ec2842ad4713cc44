#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Reports that find a commit under way join the next one instead of holding
# a FUSE worker through it (store/commit.c): while one report's commit is
# held inside its fdatasync (tests/fs/stallsync.c), with two workers, three
# more reports on other VFs are all counted by
# vfhealth_store_reports_joined_total while the commit is still held (a
# worker waiting for each would leave the third in the loop's queue), and
# none returns before its commit.  Once the sync is let go each succeeds
# with its own outcome, read back through its own open file, the three in
# one commit after the held one, and the log has each one's line.
# Then the stop: a report joined behind a held commit when SIGTERM comes is
# committed and answered before the daemon unmounts (answered EIO when the
# notifier has stopped: durable, but not to be taken as seen), and the
# daemon exits 0 with no sanitizer report.
source "$(dirname "$0")/lib.sh"
require_fuse
gate=$T/gate
stall_syncs "$gate"
start_daemon --fuse-workers 2 --threshold 3

for v in 1 2 3 4 5 6; do mkdir "$MNT/0000:41:00.$v"; done
metric() { awk -v n="$1" '$1 == n { print $2 }' "$MNT/metrics"; }
joined() { [[ $(metric vfhealth_store_reports_joined_total) == "$1" ]]; }
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

joined 0 || fail "reports joined before any commit was held: $(metric vfhealth_store_reports_joined_total)"
commits0=$(metric vfhealth_store_commits_total)
hold_next
exec 3<>"$MNT/0000:41:00.1/report" 4<>"$MNT/0000:41:00.2/report"
exec 5<>"$MNT/0000:41:00.3/report" 6<>"$MNT/0000:41:00.4/report"
report vm-a 3 &
writers=($!)
wait_for 10 "the first report's commit to be held in its sync" held
report vm-b 4 &
writers+=($!)
report vm-c 5 &
writers+=($!)
report vm-d 6 &
writers+=($!)
wait_for 10 "three reports to join the commit under way" joined 3
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
assert_eq "$(($(metric vfhealth_store_commits_total) - commits0))" 2 \
	"commits for the held report and the three that joined it"
for vm in vm-a vm-b vm-c vm-d; do
	grep -q "failed $vm .*$vm failed" "$DAEMON_LOG" || fail "no log line for the report of $vm"
done
pass "the joined reports' log lines"

# The stop, with a report joined behind a held commit.
hold_next
exec 3<>"$MNT/0000:41:00.5/report" 4<>"$MNT/0000:41:00.6/report"
report vm-e 3 &
held_writer=$!
wait_for 10 "the next report's commit to be held in its sync" held
report vm-f 4 &
joined_writer=$!
wait_for 10 "a report to join the held commit" joined 4
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

# ... and it was committed: durable across the restart.
start_daemon --threshold 3
assert_cat "$MNT/0000:41:00.6/tally" 1
assert_cat "$MNT/0000:41:00.5/tally" 1
stop_daemon
echo "ok"
