#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The audit trail on a real mount: every change made through
# the files is logged once with the writer's uid and pid and the command;
# VF/history shows the VF's claims (how each ended, by which uid) and its
# failures, also those a success or `echo 0` cleared (when, by whom, why),
# oldest first; it survives `echo 0` and a restart; it is bounded by
# HISTORY_MAX (docs/limits.md) with a first line counting what it leaves out.
source "$(dirname "$0")/lib.sh"
require_fuse
require_cmd setpriv:util-linux
start_daemon --group nogroup

V=$MNT/0000:41:00.4
T1=2026-11-29T07:00:01Z
T2=2026-11-29T07:00:02Z
T3=2026-11-29T07:00:03Z
ts='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{9}Z'
mkdir "$V"
assert_cat "$V/history" ""
assert_eq "$(stat -c '%a' "$V/history")" 444 "history's mode"

# as_writer FILE TEXT: write TEXT as uid 65534 of the writers' group, from
# a process whose pid is printed (the writer the audit line must name)
as_writer() {
	as_user 65534 sh -c 'echo $$; exec /bin/echo "$2" >"$1"' sh "$1" "$2"
}
# audited LEVEL FILE UID PID COMMAND: exactly one audit line says it
audited() {
	local line="<$1>vfhealthd: write to $2 accepted (uid $3, pid $4): $5"
	assert_eq "$(grep -cxF -- "$line" "$DAEMON_LOG")" 1 "audit lines '$line'"
}

# --- claims: released, released-if by another uid, one still live
touch "$V/assignments/vm-1"
rm "$V/assignments/vm-1"
grep -q "release of 0000:41:00.4/assignments/vm-1 accepted (uid 0, pid [0-9]*)\$" "$DAEMON_LOG" ||
	fail "the release is not audited"
touch "$V/assignments/vm-2"
claimed=$(sed -n 's/^claimed_at=//p' "$V/assignments/vm-2")
pid=$(as_writer "$V/assignments/vm-2" "release=$claimed") || fail "release= by the group"
audited 6 "0000:41:00.4/assignments/vm-2" 65534 "$pid" "release=$claimed"

# A bare claim (create, then close: a reservation until the close) is
# audited when it commits, with its creator, not the close's credentials.
mkdir "$MNT/0000:41:00.5"
pid=$(as_user 65534 sh -c 'echo $$; exec touch "$1"' sh "$MNT/0000:41:00.5/assignments/vm-0") ||
	fail "a claim by the group"
# (RELEASE is asynchronous: the close returns before the commit.)
bare_claim_line() { grep -cE "^<6>vfhealthd: claim 0000:41:00\.5/assignments/vm-0 accepted \(uid 65534, pid $pid\): claimed_at=$ts\$" "$DAEMON_LOG"; }
wait_for 10 "the audit line of a bare claim" bare_claim_line
assert_eq "$(bare_claim_line)" 1 "audit lines of a bare claim"

# --- failures: two cleared by a success, one by `echo 0` from uid 65534
pid=$(as_writer "$V/report" "failed vm-a $T1 NVRM: Xid 79 a") || fail "report by the group"
audited 6 "0000:41:00.4/report" 65534 "$pid" "failed vm-a $T1 NVRM: Xid 79 a"
put "$V/report" "failed vm-b $T2 NVRM: Xid 79 b"
assert_cat "$V/state" quarantined
put "$V/report" "ok vm-b $T2"
put "$V/report" "ok vm-b $T2" # clears nothing: not a change, no audit line
assert_eq "$(grep -c "report accepted (uid 0, pid [0-9]*): ok vm-b" "$DAEMON_LOG")" 1 "audit lines of the success"
put "$V/report" "failed vm-c $T3 NVRM: Xid 79 c"
pid=$(as_writer "$V/quarantined" 0) || fail "echo 0 by the group"
audited 5 "0000:41:00.4/quarantined" 65534 "$pid" 0
assert_cat "$V/failures" ""
assert_cat "$V/tally" 0
touch "$V/assignments/vm-3"
# (the bare claim commits at RELEASE, just after touch returns)
wait_for 10 "the bare claim of vm-3 committed" grep -q "claim 0000:41:00.4/assignments/vm-3 accepted" "$DAEMON_LOG"

# check_history: what the file says, line by line
check_history() {
	local -a h
	mapfile -t h <"$V/history"
	assert_eq "${#h[@]}" 6 "history lines ($(cat "$V/history"))"
	assert_match "${h[0]}" "^$ts claim vm-1 released=$ts ended=released by=0\$" "claim released"
	assert_match "${h[1]}" "^$claimed claim vm-2 released=$ts ended=released-if by=65534\$" "claim released-if"
	assert_match "${h[2]}" "^$ts failure vm-a assigned=2026-11-29T07:00:01.000000000Z cleared=$ts why=success:vm-b by=0 NVRM: Xid 79 a\$" "failure cleared by a success"
	assert_match "${h[3]}" "^$ts failure vm-b assigned=2026-11-29T07:00:02.000000000Z cleared=$ts why=success:vm-b by=0 NVRM: Xid 79 b\$" "the failure that succeeded"
	assert_match "${h[4]}" "^$ts failure vm-c assigned=2026-11-29T07:00:03.000000000Z cleared=$ts why=operator by=65534 NVRM: Xid 79 c\$" "failure cleared by echo 0"
	assert_match "${h[5]}" "^$ts claim vm-3 released=- ended=- by=-\$" "a live claim"
	# oldest first
	assert_eq "$(cut -d' ' -f1 "$V/history" | sort -c && echo sorted)" sorted "history order"
}
check_history
before=$(cat "$V/history")

# --- a restart keeps it all
stop_daemon
start_daemon --group nogroup
check_history
assert_eq "$(cat "$V/history")" "$before" "history after a restart"

# --- bounded: HISTORY_MAX entries, the first line counts the older ones
limit=$(sed -n 's/^#define HISTORY_MAX \([0-9]*\)$/\1/p' "${VFHEALTH_SOURCE_ROOT:-}/grammar/limits.h" 2>/dev/null || true)
[[ -n $limit ]] || limit=1000
rm "$V/assignments/vm-3"
for ((i = 0; i < limit; i++)); do
	put "$V/report" "failed vm-x$i $T1 m" >/dev/null
	[[ $((i % 2)) == 1 ]] && put "$V/report" "ok vm-x$i $T1"
done
mapfile -t h <"$V/history"
assert_eq "${h[0]}" "# 6 older entries dropped" "the first line of a full history"
assert_eq "$((${#h[@]} - 1))" "$limit" "entries shown"
assert_match "${h[-1]}" "failure vm-x$((limit - 1)) " "the newest last"
stop_daemon
echo "ok"
