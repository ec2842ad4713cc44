#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 11.4 against a real mount: an answer is reported against the
# assignment (instance, claimed_at) it was asked about, whether its claim was
# released and re-made while the query was in flight (the new claim is not
# blamed) or released and not re-made.  Deterministic: test-vmm holds each
# query at a gate until the test has changed the claim, and logs when the
# query arrived.
source "$(dirname "$0")/lib.sh"

A=0000:41:00.4
B=0000:41:00.5
start_daemon --poll-interval 0.2 --poll-timeout 20 --no-reconcile
register_vf "$A"
register_vf "$B"
start_agent g1
agent_fail g1
mkfifo "$T/gate"
start_vmm g1 --agent "unix:$T/g1.sock" --gate "$T/gate" --connect-log "$T/connects"

# 1. Re-claimed during the poll: recorded against the old assignment.
claim "$A" vm-1 "agent=hvsock:$T/g1.hv:2222" "control=$T/g1.ctl"
OLD=$(claimed_at "$A" vm-1)
wait_for 20 "the sentinel's query at the VMM" lines_at_least "$T/connects" 1
release "$A" vm-1
claim "$A" vm-1   # same instance, new claimed_at, no agent: never polled again
NEW=$(claimed_at "$A" vm-1)
[[ $OLD != "$NEW" ]] || fail "re-claim kept claimed_at"
echo x >"$T/gate"
wait_for 20 "the answer recorded against the old assignment" file_is "$MNT/$A/tally" 1
grep -q " vm-1 $OLD NVRM: .*RmInitAdapter failed!" "$MNT/$A/failures" ||
	fail "failure not recorded against (vm-1, $OLD): $(cat "$MNT/$A/failures")"
! grep -q " vm-1 $NEW " "$MNT/$A/failures" || fail "the new assignment was blamed"
[[ $(claimed_at "$A" vm-1) == "$NEW" ]] || fail "the new claim changed"
[[ $(metric vfhealth_sentinel_reports_dropped_total) == 0 ]] || fail "an answer was dropped"
[[ $(metric vfhealth_sentinel_init_failures_total) == 1 ]] || fail "the report was not counted"

# 2. Released during the poll, not re-made: report against the captured claim.
claim "$B" vm-2 "agent=hvsock:$T/g1.hv:2222" "control=$T/g1.ctl"
CAPTURED=$(claimed_at "$B" vm-2)
wait_for 20 "the query for $B at the VMM" lines_at_least "$T/connects" 2
release "$B" vm-2
echo x >"$T/gate"
wait_for 20 "the report for the released claim" file_is "$MNT/$B/tally" 1
grep -q " vm-2 $CAPTURED NVRM: .*RmInitAdapter failed!" "$MNT/$B/failures" ||
	fail "failure not recorded against (vm-2, $CAPTURED): $(cat "$MNT/$B/failures")"
[[ $(metric vfhealth_sentinel_reports_dropped_total) == 0 ]] || fail "an answer was dropped"
echo PASS
