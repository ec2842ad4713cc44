#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Two distinct failed assignments on one VF quarantine it and `quarantined`
# shows it; polling the same failed assignment many times counts once; a
# success from the triggering assignment rescinds the quarantine.  Real
# vfhealthd (sentinel on), real agents behind test-vmm hybrid vsock.
source "$(dirname "$0")/lib.sh"

VF=0000:41:00.4
start_daemon --threshold 2 --poll-interval 0.2 --poll-timeout 2 --no-reconcile
register_vf "$VF"
start_failing_guests g1 g2

# First failed assignment: recorded once, however often it is polled.
claim "$VF" vm-1 "agent=hvsock:$T/g1.hv:2222" "control=$T/g1.ctl"
T1=$(claimed_at "$VF" vm-1)
wait_for 20 "tally 1" file_is "$MNT/$VF/tally" 1
wait_polls 5
file_is "$MNT/$VF/tally" 1 || fail "tally moved past 1 on repeated polls"
[[ $(metric vfhealth_sentinel_init_failures_total) == 1 ]] ||
	fail "init_failures_total $(metric vfhealth_sentinel_init_failures_total), want 1"
metric_ge 'vfhealth_sentinel_checks_total{result="failed"}' 6 ||
	fail "the failed assignment was not polled repeatedly"
file_is "$MNT/$VF/quarantined" 0 || fail "quarantined after one failure"
# One event, one line each: the guest's words from the
# sentinel, the store's decision from vfhealthd; repeated polls add nothing.
[[ $(grep -c "vm-1.*failed GPU initialization" "$T/daemon.log") == 1 ]] ||
	fail "a recorded failure must log the guest's words once, an unchanged one nothing"
grep -q "^<6>.*vf $VF: instance vm-1 (claimed $T1) failed GPU initialization: .*RmInitAdapter failed!" "$T/daemon.log" ||
	fail "no info line with the guest's message"
[[ $(grep -c "$VF: failed assignment of instance vm-1 recorded (1 of 2 to quarantine): NVRM: .*RmInitAdapter failed!" "$T/daemon.log") == 1 ]] ||
	fail "the store's decision must be logged exactly once"
grep -q "vm-1 $T1 " "$MNT/$VF/failures" || fail "failure not recorded against (vm-1, $T1)"
# The agent's telemetry, per claim: labels vf and instance_id.
grep -Eq "^vfhealth_sentinel_agent_info\{vf=\"$VF\",instance_id=\"vm-1\",version=\"[0-9][0-9A-Za-z.+~_-]*\"\} 1$" "$MNT/metrics" ||
	fail "no vfhealth_sentinel_agent_info for vm-1: $(grep agent_info "$MNT/metrics")"
metric_ge "vfhealth_sentinel_agent_kmsg_records_lost_total{vf=\"$VF\",instance_id=\"vm-1\"}" 0 ||
	fail "no kmsg_records_lost_total for vm-1"

# A second, distinct assignment on the same VF: quarantine.
release "$VF" vm-1
claim "$VF" vm-2 "agent=hvsock:$T/g2.hv:2222" "control=$T/g2.ctl"
T2=$(claimed_at "$VF" vm-2)
wait_for 20 "quarantine" file_is "$MNT/$VF/quarantined" 1
file_is "$MNT/quarantined" "$VF" || fail "top-level quarantined does not list $VF"
file_is "$MNT/$VF/tally" 2 || fail "tally $(cat "$MNT/$VF/tally"), want 2"
# One telemetry series set per live polled claim: vm-1's is gone with its claim.
wait_polls 2
! grep -q 'instance_id="vm-1"' "$MNT/metrics" || fail "the released claim vm-1 still has telemetry series"
grep -q "^vfhealth_sentinel_agent_info{vf=\"$VF\",instance_id=\"vm-2\"," "$MNT/metrics" ||
	fail "no telemetry for vm-2"
[[ $(metric vfhealth_sentinel_init_failures_total) == 2 ]] || fail "init_failures_total != 2"
[[ $(metric vfhealth_sentinel_quarantines_total) == 1 ]] || fail "quarantines_total != 1"
[[ $(grep -c "quarantined" "$T/daemon.log") == 1 ]] ||
	fail "the quarantine must be logged exactly once: $(grep quarantined "$T/daemon.log")"
grep -q "^<3>.*$VF: quarantined after 2 distinct failed assignments (threshold 2): vm-1, vm-2; last failure: NVRM: .*RmInitAdapter failed!" "$T/daemon.log" ||
	fail "no error naming the distinct failed assignments, the threshold and the NVRM line"

# The triggering assignment's guest proves its GPU works: rescind.
agent_make_ok g2
wait_for 20 "rescind" file_is "$MNT/$VF/quarantined" 0
file_is "$MNT/$VF/tally" 0 || fail "failures not cleared by the success"
file_is "$MNT/quarantined" "" || fail "top-level quarantined still lists $VF"
[[ $(grep -c "quarantine rescinded" "$T/daemon.log") == 1 ]] ||
	fail "the rescind must be logged exactly once"
grep -q "^<5>.*$VF: back in service: quarantine rescinded, instance vm-2 succeeded (2 failures cleared)" "$T/daemon.log" ||
	fail "no notice line for the rescind"
metric_ge 'vfhealth_sentinel_checks_total{result="ok"}' 1 || fail "ok checks not counted"
# Detection latency: vm-2's first failed and first ok answer, each once
# however often polled (vm-1 too when it was claimed after the first listing).
wait_polls 3
failed_count=$(metric 'vfhealth_detection_latency_seconds_count{kind="failed"}')
[[ $failed_count == 1 || $failed_count == 2 ]] || fail "failed latency count '$failed_count', want 1..2"
[[ $(metric 'vfhealth_detection_latency_seconds_count{kind="ok"}') == 1 ]] ||
	fail "ok latency count $(metric 'vfhealth_detection_latency_seconds_count{kind="ok"}'), want 1"
[[ $(metric 'vfhealth_detection_latency_seconds_bucket{kind="ok",le="+Inf"}') == 1 ]] ||
	fail "the +Inf bucket is not the count"
grep -q '^vfhealth_sentinel_config_info{poll_interval_seconds="0.2",poll_timeout_seconds="2",concurrency="64"} 1$' \
	"$MNT/metrics" || fail "no vfhealth_sentinel_config_info with the options in force"
# Every series is present, with HELP and TYPE.
for r in ok failed unknown rpc_error unsupported_agent; do
	[[ -n $(metric "vfhealth_sentinel_checks_total{result=\"$r\"}") ]] || fail "no $r series"
done
grep -q '^# TYPE vfhealth_sentinel_liveness_uncertain_total counter' "$MNT/metrics" || fail "no TYPE line"
grep -q '^# TYPE vfhealth_sentinel_list_errors_total counter' "$MNT/metrics" || fail "no list errors"
echo PASS
