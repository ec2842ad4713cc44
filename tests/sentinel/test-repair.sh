#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The store becomes unavailable (its disk fills) while a FAILED answer is in
# flight: the report is refused and not recorded; each poll then makes
# exactly one repair attempt (counted against polls_total), which fails
# while the disk is full, and still polls the claim (read from memory); once
# there is room the sentinel's own repair brings the store back (nobody else
# writes `repair`) and the next poll's report is recorded.
source "$(dirname "$0")/lib.sh"
require_fuse

mount_tmpfs "$T/db" 2m 0700
VF=0000:41:00.4
start_daemon --poll-interval 0.2 --poll-timeout 20 --no-reconcile
register_vf "$VF"
start_agent g1
agent_fail g1
mkfifo "$T/gate"
start_vmm g1 --agent "unix:$T/g1.sock" --gate "$T/gate" --connect-log "$T/connects"
claim "$VF" vm-1 "agent=hvsock:$T/g1.hv:2222" "control=$T/g1.ctl"
wait_for 20 "the query held at the VMM" lines_at_least "$T/connects" 1

# The disk fills; the next commit fails and latches the store unavailable.
# (Re-reading the claim before the report fails then too, so the answer is
# dropped; were it not, the report itself would fail.)
dd if=/dev/zero of="$T/db/fill" bs=64k 2>/dev/null || true
! sh -c "echo 3 >'$MNT/threshold'" 2>/dev/null || fail "a commit succeeded on a full disk"
grep -q '^unavailable' "$MNT/status" || fail "status: $(cat "$MNT/status")"

# Release this query and every later one.
printf 'x%.0s' $(seq 1 200) >"$T/gate"
wait_for 20 "the FAILED answer classified" metric_ge 'vfhealth_sentinel_checks_total{result="failed"}' 1
wait_for 20 "a failed repair attempt by the sentinel" \
	grep -q "sentinel: store unavailable.*repair failed" "$T/daemon.log"
file_is "$MNT/$VF/tally" 0 || fail "recorded while the store was unavailable"
grep -q '^unavailable' "$MNT/status" || fail "the store came back on a full disk"
# During an outage the sentinel keeps polling and makes ONE repair attempt per
# poll (a poll in progress at either end may add one).
repairs() { grep -c "sentinel: store .*repair failed" "$T/daemon.log"; }
P_A=$(polls) L_A=$(repairs) C_A=$(wc -l <"$T/connects")
wait_polls 4
P_B=$(polls) L_B=$(repairs)
# ... and keeps asking the agent: claims read from memory.
wait_for 20 "the claim polled during the outage" lines_at_least "$T/connects" $((C_A + 2))
grep -q '^unavailable' "$MNT/status" || fail "the store came back on a full disk"
((L_B - L_A <= P_B - P_A + 1)) || fail "$((L_B - L_A)) repair attempts in $((P_B - P_A)) polls"
((L_B - L_A >= P_B - P_A - 1)) || fail "polls without a repair attempt while unavailable"

rm "$T/db/fill"
wait_for 20 "the sentinel's repair" grep -q "sentinel: store repaired" "$T/daemon.log"
wait_for 20 "the report retried" file_is "$MNT/$VF/tally" 1
file_is "$MNT/status" ok || fail "status: $(cat "$MNT/status")"
[[ $(metric vfhealth_sentinel_init_failures_total) == 1 ]] || fail "init_failures_total != 1"
[[ $(metric vfhealth_sentinel_list_errors_total) == 0 ]] ||
	fail "the claims could not be listed or read while unavailable"
echo PASS
