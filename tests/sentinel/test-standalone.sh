#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The same sentinel as its own process (vfhealth-sentinel MOUNTPOINT) against
# a vfhealthd started with --no-sentinel --no-reconcile (which runs no
# sentinel program at all): it reports through the mount like the built-in
# one, and its counters go to --metrics-file (the daemon's metrics carry no
# sentinel series then).
source "$(dirname "$0")/lib.sh"
: "${VFHEALTH_SENTINEL:?}"

VF=0000:41:00.4
start_daemon --no-sentinel --no-reconcile
[[ -z $(metric vfhealth_sentinel_polls_total) ]] || fail "--no-sentinel --no-reconcile still renders sentinel metrics"
register_vf "$VF"
start_agent g1
agent_fail g1
start_vmm g1
claim "$VF" vm-1 "agent=hvsock:$T/g1.hv:2222" "control=$T/g1.ctl"

"$VFHEALTH_SENTINEL" --socket-dir "$T" --poll-interval 0.2 --poll-timeout 2 --no-reconcile \
	--metrics-file "$T/sentinel.prom" "$MNT" >>"$T/sentinel.log" 2>&1 &
BG_PIDS+=("$!")
wait_for 20 "tally 1 from the standalone sentinel" file_is "$MNT/$VF/tally" 1
METRICS_FILE=$T/sentinel.prom
wait_for 20 "metrics file" metric_ge vfhealth_sentinel_init_failures_total 1
metric_ge 'vfhealth_sentinel_checks_total{result="failed"}' 1 || fail "no failed check counted"
grep -q "^<6>.*vf $VF: instance vm-1 (claimed .*) failed GPU initialization: " "$T/sentinel.log" ||
	fail "no line with the guest's words from the standalone sentinel"

# Bad options get a clear message and exit 2.
rc=0
"$VFHEALTH_SENTINEL" --poll-interval 0 "$MNT" 2>"$T/bad.log" || rc=$?
((rc == 2)) || fail "--poll-interval 0 exited $rc"
grep -q "poll-interval" "$T/bad.log" || fail "no message for a bad --poll-interval"
echo PASS
