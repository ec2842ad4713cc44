#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Operator holds, the breaker and the log, on a
# real mount: `echo 1 > VF/quarantined` is a hold that no success lifts, also
# on an automatically quarantined VF; `echo 0` lifts everything; VF/state and
# VF/since follow the lifecycle and survive a restart; max_quarantined counts
# automatic quarantines only, and a VF it holds back reads held-back and is
# listed in held_back, which inotify watchers see change; and each event is
# logged exactly once, at its level, in its words.
source "$(dirname "$0")/lib.sh"
require_fuse
require_cmd inotifywait:inotify-tools
start_daemon

A=$MNT/0000:41:00.4
B=$MNT/0000:41:00.5
C=$MNT/0000:41:00.6
D=$MNT/0000:41:00.7
TC=2026-11-29T07:00:00Z
TD=2026-11-29T07:01:00Z
ts='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{9}Z'
mkdir "$A" "$B" "$C" "$D"

# expect_log LEVEL TEXT: the daemon logged TEXT on exactly one line, that
# line is the whole "<LEVEL>vfhealthd: TEXT", and no other line says it (at
# another level).
expect_log() {
	local n
	n=$(grep -cF -- "$2" "$DAEMON_LOG" || true)
	assert_eq "$n" 1 "log lines saying '$2'"
	grep -qxF -- "<$1>vfhealthd: $2" "$DAEMON_LOG" ||
		fail "'$2' is not logged at level $1: $(grep -F -- "$2" "$DAEMON_LOG")"
	pass "'$2' logged at level $1"
}
log_count() { grep -cF -- "$1" "$DAEMON_LOG" || true; }
# log_lines_saying TEXT: lines whose whole message (after "<N>vfhealthd: ") is TEXT
log_lines_saying() { sed 's/^<[0-7]>vfhealthd: //' "$DAEMON_LOG" | grep -cxF -- "$1" || true; }

# since: an empty line while in service
expect_in_service() {
	assert_eq "$(od -An -c "$1/since" | tr -d ' ')" '\n' "since of $1 in service"
}

# --- a fresh VF: ok, in service
assert_cat "$A/state" ok
expect_in_service "$A"

# --- failing below the threshold, then quarantined by two distinct failed
# assignments (two instances that failed once each: not "2 times")
put "$A/report" "failed vm-c $TC RmInitAdapter failed"
assert_cat "$A/state" failing
expect_in_service "$A"
expect_log 5 "0000:41:00.4: failed assignment of instance vm-c recorded (1 of 2 to quarantine): RmInitAdapter failed"
put "$A/report" "failed vm-d $TD RmInitAdapter failed"
assert_cat "$A/state" quarantined
since_q=$(cat "$A/since")
assert_match "$since_q" "^$ts\$" "since of a quarantined VF"
expect_log 3 "0000:41:00.4: quarantined after 2 distinct failed assignments (threshold 2): vm-c, vm-d; last failure: RmInitAdapter failed"
assert_eq "$(log_count "times (threshold")" 0 "the misleading 'failed N times' line"
# A repeat of a recorded failure is no new event.
put "$A/report" "failed vm-d $TD again"
assert_eq "$(log_count "vm-d recorded")" 0 "log lines for the repeated failure"

# --- rule 5: echo 1 on the quarantined VF is a hold; the triggering
# assignment's success clears the failures but does not put it back
put "$A/quarantined" 1
assert_cat "$A/state" held
assert_cat "$A/since" "$since_q"
expect_log 5 "0000:41:00.4: held by the operator (also quarantined)"
out=$("$VFTOOL" write-read "$A/report" "ok vm-d $TD")
assert_eq "$out" "cleared=2 rescinded=0" "success on a held VF"
expect_log 6 "0000:41:00.4: instance vm-d succeeded: 2 failures cleared"
assert_cat "$A/tally" 0
assert_cat "$A/quarantined" 1
assert_cat "$A/state" held
assert_cat "$A/since" "$since_q"
assert_cat "$MNT/quarantined" 0000:41:00.4
expect_err "$EBUSY" touch "$A/assignments/vm-e"
# Held: a failure changes nothing, a second echo 1 neither (nor is logged).
out=$("$VFTOOL" write-read "$A/report" "failed vm-e $TD x")
assert_eq "$out" "unchanged failures=0 threshold=2" "failure on a held VF"
put "$A/quarantined" 1
assert_eq "$(log_count "held by the operator")" 1 "log lines for a repeated hold"
# The hold and its time survive a restart.
stop_daemon
start_daemon
assert_cat "$A/state" held
assert_cat "$A/since" "$since_q"
assert_cat "$A/quarantined" 1

# --- echo 0 lifts everything: hold, automatic quarantine, failures
put "$B/report" "failed vm-b1 $TC x"
put "$B/report" "failed vm-b2 $TD x"
put "$B/quarantined" 1
assert_cat "$B/state" held
put "$B/quarantined" 0
expect_log 5 "0000:41:00.5: back in service: cleared by the operator (hold lifted, quarantine lifted, 2 failures dropped)"
put "$A/quarantined" 0
for vf in "$A" "$B"; do
	assert_cat "$vf/state" ok
	expect_in_service "$vf"
	assert_cat "$vf/quarantined" 0
	assert_cat "$vf/tally" 0
	touch "$vf/assignments/vm-back"
	rm "$vf/assignments/vm-back"
done
expect_log 5 "0000:41:00.4: back in service: cleared by the operator (hold lifted)"
assert_cat "$MNT/quarantined" ""
put "$B/quarantined" 0 # nothing to clear: no event
assert_eq "$(log_count "0000:41:00.5: back in service")" 1 "log lines for a clear of a clean VF"

# --- rule 6: the breaker counts automatic quarantines only
put "$MNT/max_quarantined" 1
put "$C/quarantined" 1 # drained for maintenance: does not use the cap
out=$("$VFTOOL" write-read "$D/report" "failed vm-w1 $TC x")
assert_eq "$out" "recorded failures=1 threshold=2" "first failure on D"
out=$("$VFTOOL" write-read "$D/report" "failed vm-w2 $TD x")
assert_eq "$out" "quarantined failures=2 threshold=2" "a real wedge with a hold and a cap of 1"
assert_cat "$D/state" quarantined
expect_log 3 "0000:41:00.7: quarantined after 2 distinct failed assignments (threshold 2): vm-w1, vm-w2; last failure: x"
assert_cat "$MNT/held_back" ""

# watch_held_back: an inotifywait that exits at the next IN_CLOSE_WRITE on
# held_back, armed on return; held_back_woken WHAT: it did (exit status 0).
watch_held_back() {
	background inotifywait -e close_write "$MNT/held_back" >"$T/iw.out" 2>"$T/iw.err"
	IW_PID=${BG_PIDS[-1]}
	wait_until 10 grep -q "Watches established" "$T/iw.err" ||
		fail "inotifywait did not start: $(cat "$T/iw.err")"
}
held_back_woken() {
	local rc=0
	wait_for 30 "an inotify event on held_back ($1)" process_gone "$IW_PID"
	wait "$IW_PID" || rc=$?
	((rc == 0)) || fail "inotifywait on held_back ($1) exited $rc: $(cat "$T/iw.out" "$T/iw.err")"
	assert_match "$(cat "$T/iw.out")" "held_back CLOSE_WRITE" "the inotify event ($1)"
}

# The cap is reached by D: A's wedge is held back, in service, listed, and
# held_back's watchers are told.
put "$A/report" "failed vm-a1 $TC x"
watch_held_back
out=$("$VFTOOL" write-read "$A/report" "failed vm-a1 $TD x") # same instance, another assignment
assert_eq "$out" "recorded failures=2 threshold=2 breaker=engaged" "held back by the breaker"
held_back_woken "A held back"
assert_cat "$A/state" held-back
expect_in_service "$A"
assert_cat "$A/quarantined" 0
assert_cat "$MNT/held_back" 0000:41:00.4
assert_cat "$MNT/quarantined" $'0000:41:00.6\n0000:41:00.7'
expect_log 3 "0000:41:00.4: held back by the breaker (max_quarantined 1 reached) after 2 distinct failed assignments (threshold 2): vm-a1 (2 assignments); last failure: x"
assert_match "$(cat "$MNT/metrics")" $'\nvfhealth_breaker_engaged 1\n' "metrics while the breaker holds"
touch "$A/assignments/vm-z" # held back is still in service
rm "$A/assignments/vm-z"
# A hold takes it out of the held-back set: watchers are told again.
watch_held_back
put "$A/quarantined" 1
held_back_woken "A held"
assert_cat "$MNT/held_back" ""
assert_cat "$A/state" held
assert_match "$(cat "$MNT/metrics")" $'\nvfhealth_breaker_engaged 0\n' "metrics after the hold"

# --- every event above was logged once: nothing twice at two levels
for text in "quarantined after" "held back by the breaker" "held by the operator" \
	"cleared by the operator"; do
	while IFS= read -r line; do
		n=$(grep -cxF -- "$line" "$DAEMON_LOG")
		assert_eq "$n" 1 "copies of the log line '$line'"
		msg=${line#<[0-7]>vfhealthd: }
		assert_eq "$(log_lines_saying "$msg")" 1 "lines saying '$msg'"
	done < <(grep -F -- "$text" "$DAEMON_LOG")
done

stop_daemon
echo "ok"
