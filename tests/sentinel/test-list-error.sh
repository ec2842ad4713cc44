#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A listing failure counts vfhealth_sentinel_list_errors_total once per poll
# (not as a check result), however many entries failed, and what could be listed is still polled.  Runs the
# standalone sentinel against a plain directory laid out like the mount (no
# FUSE needed): one unparsable assignment, one assignments/ that is not a
# directory, one good claim whose agent never answers.
source "$(dirname "$0")/lib.sh"
: "${VFHEALTH_SENTINEL:?}"

FAKE=$T/fake
mkdir -p "$FAKE/0000:41:00.1/assignments" "$FAKE/0000:41:00.2" "$FAKE/0000:41:00.3/assignments"
echo ok >"$FAKE/status"
printf '%s\n' "0000:41:00.1 vm-1" "0000:41:00.2 vm-2" "0000:41:00.3 vm-3" >"$FAKE/claims"
echo "this is not key=value lines" | tr -d '=' >"$FAKE/0000:41:00.1/assignments/vm-1"
echo "not a directory" >"$FAKE/0000:41:00.2/assignments"
start_vmm hung --never-answer --connect-log "$T/connects"
printf 'claimed_at=2026-11-29T07:44:51.000000001Z\nagent=hvsock:%s:2222\ncontrol=%s\npid=\n' \
	"$T/hung.hv" "$T/hung.ctl" >"$FAKE/0000:41:00.3/assignments/vm-3"

METRICS_FILE=$T/sentinel.prom
"$VFHEALTH_SENTINEL" --socket-dir "$T" --poll-interval 0.2 --poll-timeout 0.2 --no-reconcile \
	--metrics-file "$METRICS_FILE" "$FAKE" >>"$T/sentinel.log" 2>&1 &
BG_PIDS+=("$!")
wait_for 20 "three polls" metric_ge vfhealth_sentinel_polls_total 3
kill "${BG_PIDS[-1]}"
wait "${BG_PIDS[-1]}" || fail "vfhealth-sentinel exited $? on SIGTERM"
polls=$(metric vfhealth_sentinel_polls_total)
errors=$(metric vfhealth_sentinel_list_errors_total)
hung=$(metric 'vfhealth_sentinel_checks_total{result="rpc_error"}')
echo "polls=$polls list_errors=$errors rpc_error=$hung"
[[ -z $(metric 'vfhealth_sentinel_checks_total{result="list_error"}') ]] ||
	fail "a failed listing is counted as a check result"
((errors == polls)) || fail "list_errors $errors after $polls polls (two bad entries each): want one per poll"
((hung == polls)) || fail "the good claim was not polled every time ($hung of $polls)"
grep -q "cannot read assignment 0000:41:00.1/vm-1" "$T/sentinel.log" || fail "bad assignment not logged"
echo PASS
