#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Against a real mount: a FAILED answer is reported against the assignment
# (instance, claimed_at) it was asked about, whether its claim was released
# and re-made while the query was in flight (the new claim is not blamed)
# or released and not re-made.  An OK answer is booked only if that
# assignment still holds the VF after the answer: the same agent endpoint,
# re-claimed meanwhile, may have answered for the new boot, whose OK must
# not clear the old assignment's failure nor rescind the quarantine it
# triggered.  Deterministic: test-vmm holds each query at a gate until the
# test has changed the claim, and logs when the query arrived.
source "$(dirname "$0")/lib.sh"

A=0000:41:00.4
B=0000:41:00.5
C=0000:41:00.6
start_daemon --poll-interval 0.2 --poll-timeout 20 --no-reconcile
register_vf "$A"
register_vf "$B"
register_vf "$C"
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
printf x >"$T/gate"
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
printf x >"$T/gate"
wait_for 20 "the report for the released claim" file_is "$MNT/$B/tally" 1
grep -q " vm-2 $CAPTURED NVRM: .*RmInitAdapter failed!" "$MNT/$B/failures" ||
	fail "failure not recorded against (vm-2, $CAPTURED): $(cat "$MNT/$B/failures")"
[[ $(metric vfhealth_sentinel_reports_dropped_total) == 0 ]] || fail "an answer was dropped"

# 3. An OK on its way for (vm-1, OLD) while vm-1 is released and claimed
#    again with the same agent endpoint, and the old assignment's failure
#    (an earlier answer of its boot, written here as the sentinel would)
#    quarantines the VF: the OK is the new boot's and is not booked.
agent_make_ok g1
claim "$C" vm-0
write_once "$MNT/$C/report" "failed vm-0 $(claimed_at "$C" vm-0) NVRM: RmInitAdapter failed! (earlier VM)"
release "$C" vm-0
claim "$C" vm-1 "agent=hvsock:$T/g1.hv:2222" "control=$T/g1.ctl"
OLD=$(claimed_at "$C" vm-1)
wait_for 20 "the query for $C at the VMM" lines_at_least "$T/connects" 3
release "$C" vm-1
claim "$C" vm-1 "agent=hvsock:$T/g1.hv:2222" "control=$T/g1.ctl"
[[ $(claimed_at "$C" vm-1) != "$OLD" ]] || fail "re-claim kept claimed_at"
write_once "$MNT/$C/report" "failed vm-1 $OLD NVRM: RmInitAdapter failed! (the old boot)"
file_is "$MNT/$C/quarantined" 1 || fail "not quarantined by (vm-1, $OLD)"
printf x >"$T/gate"
wait_for 20 "the OK answer dropped" metric_ge vfhealth_sentinel_reports_dropped_total 1
grep -q "vf $C: claim changed during the poll (was vm-1 claimed $OLD, now vm-1 claimed .*); ok answer dropped" \
	"$T/daemon.log" || fail "the dropped answer is not logged"
file_is "$MNT/$C/quarantined" 1 || fail "the new boot's OK rescinded the old assignment's quarantine"
file_is "$MNT/$C/tally" 2 || fail "the new boot's OK cleared the old assignment's failure"
grep -q " vm-1 $OLD NVRM: RmInitAdapter failed! (the old boot)" "$MNT/$C/failures" ||
	fail "the failure of (vm-1, $OLD) is gone: $(cat "$MNT/$C/failures")"
echo PASS
