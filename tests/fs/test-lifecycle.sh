#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# vfhealthd(8) itself: options, directories it creates, readiness on
# $NOTIFY_SOCKET, SIGHUP logged and ignored (a HUP that stopped it with
# status 0 would stop it for good under Restart=on-failure), clean unmount
# on SIGTERM and SIGINT, a crash (SIGKILL) then
# a restart on the stale mount with the state intact, daemonizing without
# -f, and an unmount from outside ending the daemon.
source "$(dirname "$0")/lib.sh"
require_fuse

# --- options
"$VFHEALTHD" --help | grep -q -- "--db PATH" || fail "--help does not document --db"
assert_match "$("$VFHEALTHD" --version)" "^vfhealthd [0-9]+\.[0-9]+\.[0-9]+" "--version"
for bad in "--threshold 0" "--threshold 1001" "--threshold x" "--no-such-option" "a b"; do
	rc=0
	# shellcheck disable=SC2086 # the words are the arguments
	"$VFHEALTHD" -f --db "$DB" $bad "$MNT" 2>/dev/null || rc=$?
	assert_eq "$rc" 2 "exit status for '$bad'"
done
! mountpoint -q "$MNT" 2>/dev/null || fail "a refused start mounted something"
expect_err "invalid FUSE options" "$VFHEALTHD" -f --db "$DB" -o no_such_fuse_option "$MNT"

# --- the mountpoint and the database directories are created; --threshold
# applies to a new database; the default sentinel runs along
MNT=$T/run/deeper/vfhealth
DB=$T/lib/a/b/vfhealth.db
DAEMON_ARGS=()
start_daemon --threshold 3
[[ -f $DB ]] || fail "no database at $DB"
assert_cat "$MNT/threshold" 3

make_vfs V
put "$V/report" "failed vm-1 2026-11-29T07:00:00Z wedged"
touch "$V/assignments/vm-2"
put "$MNT/max_quarantined" 5
failures=$(cat "$V/failures")

# --- a second instance on the same database is refused, and unmounts again
rc=0
"$VFHEALTHD" -f --no-sentinel --db "$DB" "$T/second" 2>"$T/second.log" || rc=$?
assert_eq "$rc" 1 "exit status of a second instance on the same database"
! mountpoint -q "$T/second" || fail "the refused instance left its mount"
assert_cat "$MNT/threshold" 3

# --- SIGHUP is logged, and the daemon goes on serving the same mount
kill -HUP "$DAEMON_PID"
wait_for 10 "SIGHUP to be logged" grep -q "signal HUP: nothing to reload" "$T/daemon.log"
kill -0 "$DAEMON_PID" 2>/dev/null || fail "vfhealthd exited on SIGHUP"
assert_cat "$MNT/threshold" 3
put "$MNT/max_quarantined" 5

# --- SIGINT unmounts cleanly too
kill -INT "$DAEMON_PID"
rc=0
wait "$DAEMON_PID" || rc=$?
DAEMON_PID=
assert_eq "$rc" 0 "exit status after SIGINT"
! mountpoint -q "$MNT" || fail "still mounted after SIGINT"
grep -q "unmounted $MNT" "$T/daemon.log" || fail "no unmount logged"

# --- a crash leaves a stale mount; the next start recovers it
DAEMON_ARGS=(--no-sentinel)
start_daemon
kill_daemon
expect_err "Transport endpoint is not connected" stat "$MNT/threshold"
start_daemon # no --threshold: the stored value stays
grep -q "stale mount" "$T/daemon.log" || fail "stale mount recovery not logged"
assert_cat "$MNT/threshold" 3
assert_cat "$MNT/max_quarantined" 5
assert_cat "$V/tally" 1
assert_eq "$(cat "$V/failures")" "$failures" "failures after the crash"
assert_eq "$(ls "$V/assignments")" vm-2 "claims after the crash"
# Every log line carries a syslog priority prefix.
if grep -v '^<[0-7]>' "$T/daemon.log" | grep -q .; then
	fail "log lines without a priority prefix: $(grep -v '^<[0-7]>' "$T/daemon.log" | head -3)"
fi
stop_daemon

# --- SIGKILL while the notifier is busy writing through the mount: the
# daemon must still die (a thread of its own blocked on the mount would keep
# it, and the mount, hanging forever), and the next start recovers.
for round in 1 2 3 4 5 6 7 8; do
	start_daemon
	(
		for ((i = 1; ; i++)); do
			echo $((i % 900 + 3)) >"$MNT/threshold" || exit 0
		done
	) 2>/dev/null &
	writer=$!
	wait_until 10 sh -c '[ "$(cat "$1")" != 3 ]' sh "$MNT/threshold" || fail "writer did not start"
	kill_daemon
	wait "$writer" 2>/dev/null || true
done
start_daemon
assert_match "$(cat "$MNT/threshold")" '^[0-9]+$' "threshold after the SIGKILL rounds"
put "$MNT/threshold" 3
stop_daemon

# --- an unmount from outside ends the daemon, with status 1 (a failure:
# Restart=on-failure restarts it) and one line that says why
start_daemon
# lazily when a plain unmount finds the mount busy for a moment (a file
# open there): the daemon sees the session end either way
fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT"
rc=0
wait "$DAEMON_PID" || rc=$?
DAEMON_PID=
assert_eq "$rc" 1 "exit status after an external unmount"
assert_eq "$(grep -c "$MNT was unmounted from outside" "$DAEMON_LOG")" 1 "log lines about the unmount"

# --- without -f it daemonizes: the command returns, the daemon serves and
# still tells $NOTIFY_SOCKET (MAINPID is the daemon, not the command)
fifo=$T/notify.fifo
rm -f "$fifo"
mkfifo "$fifo"
"$VFTOOL" notify-listen "$T/notify.sock" 20000 >"$fifo" &
listener=$!
exec 8<"$fifo"
read -r -t 10 -u 8 line
assert_eq "$line" bound "listener"
NOTIFY_SOCKET=$T/notify.sock "$VFHEALTHD" --no-sentinel --db "$DB" "$MNT" 2>>"$T/daemon.log" ||
	fail "vfhealthd without -f exited $?"
read -r -t 25 -u 8 line || line=nothing
exec 8<&-
wait "$listener" || true
[[ $line =~ ^ready\ ([0-9]+)$ ]] || fail "no READY=1 from the daemon: $line"
daemon=${BASH_REMATCH[1]}
DAEMON_PID=$daemon # for cleanup (not our child: never waited)
assert_cat "$MNT/threshold" 3
kill -TERM "$daemon"
# Not our child: gone, or a zombie waiting for whoever adopted it.
wait_until 15 process_gone "$daemon" || fail "daemonized vfhealthd did not exit"
DAEMON_PID=
! mountpoint -q "$MNT" || fail "still mounted after the daemon's SIGTERM"

# --- SIGTERM while readers hold a file and a directory open: the kernel
# never releases them once the mount is gone, so the daemon frees them
# itself (stop_daemon fails on a LeakSanitizer report or a non-zero exit)
start_daemon
mkdir "$MNT/0000:42:00.1"
exec 6<"$MNT/status"
read -r -u 6 line
assert_eq "$line" ok "status read through the held descriptor"
exec 5<"$MNT/0000:42:00.1/tally"
(cd "$MNT/0000:42:00.1" && exec sleep 60) &
BG_PIDS+=("$!")
stop_daemon
exec 5<&- 6<&-
echo "ok"
