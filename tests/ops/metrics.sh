#!/usr/bin/env bash
# metrics.sh - the `metrics` file of a real vfhealthd (with the sentinel on)
# is valid Prometheus exposition format (promtool check metrics, lint
# included) in a state with registered, claimed, quarantined and failing VFs
# and the breaker engaged; it has every series the alert rules use, and the
# values match the state: per VF (out of service and why, failures on
# record, the last check of its claim) and the build and configuration.
# Skips (77) only without FUSE or promtool.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse
require_cmd promtool:prometheus

mnt=$MNT
sys=$T/sys/bus/pci/devices # sysfs, where a VF's parent comes from
mkdir -p "$sys/0000:41:00.4"
start_daemon --poll-interval 0.2 --poll-timeout 0.5 --sysfs-root "$T/sys"
for vf in 0000:41:00.4 0000:41:00.5 0000:41:00.6 0000:41:00.7 0000:41:01.0 0000:41:01.1; do
	mkdir "$mnt/$vf"
done
echo 1 > "$mnt/max_quarantined"
report_failed "$mnt" 0000:41:00.4 vm-a                   # recorded
report_failed "$mnt" 0000:41:00.4 vm-a                   # unchanged (same assignment)
report_failed "$mnt" 0000:41:00.4 vm-b                   # quarantined
report_failed "$mnt" 0000:41:00.5 vm-c
report_failed "$mnt" 0000:41:00.5 vm-d                   # held back: breaker engaged
echo "ok vm-e -" > "$mnt/0000:41:00.6/report"            # ok, nothing to clear
echo 1 > "$mnt/0000:41:01.0/quarantined"                  # by the operator
ln -s ../0000:41:00.0 "$sys/0000:41:00.4/physfn"          # its physical function,
echo 0000:41:00.0 > "$mnt/0000:41:00.4/parent"            # recorded
# A claim without an agent (not polled) whose check is reported as the
# sentinel would: the VF's last check; a report about another assignment is not.
: > "$mnt/0000:41:01.1/assignments/vm-g"
claimed_at=$(sed -n 's/^claimed_at=//p' "$mnt/0000:41:01.1/assignments/vm-g")
echo "ok vm-g $claimed_at" > "$mnt/0000:41:01.1/report"
echo "ok vm-h -" > "$mnt/0000:41:01.1/report"
# A claim whose agent does not answer: the sentinel counts an rpc_error.  Its
# VMM is this shell (a running pid; a control socket would have to listen).
mkdir -p "$T/vmm"
: > "$mnt/0000:41:00.7/assignments/vm-f"
write_once "$mnt/0000:41:00.7/assignments/vm-f" \
	"agent=unix:$T/vmm/nobody.sock"$'\n'"pid=$$"$'\n'

metric() { awk -v want="$1" '$1 == want { print $2 }' "$T/metrics"; }
sentinel_checked() {
	cat "$mnt/metrics" > "$T/metrics"
	[[ -n $(metric 'vfhealth_sentinel_checks_total{result="rpc_error"}') &&
	   $(metric 'vfhealth_sentinel_checks_total{result="rpc_error"}') != 0 ]]
}
wait_for 20 "the sentinel to poll the claim" sentinel_checked

promtool check metrics < "$T/metrics" || { cat "$T/metrics" >&2; fail "promtool check metrics"; }

# Every series the rules and dashboards use, with the value the state implies.
want() { # SERIES VALUE
	local got
	got=$(metric "$1")
	[[ $got == "$2" ]] || fail "$1 is '${got}', want $2"
}
want vfhealth_vfs 6
want vfhealth_quarantined_vfs 1  # 41:00.4 by its failures; 41:01.0 is held, not quarantined
want vfhealth_held_vfs 1
want vfhealth_store_unavailable 0
want vfhealth_breaker_engaged 1
want 'vfhealth_reports_total{kind="failed",outcome="recorded"}' 3  # vm-a, vm-c, vm-d (held back)
want 'vfhealth_reports_total{kind="failed",outcome="unchanged"}' 1
want 'vfhealth_reports_total{kind="failed",outcome="quarantined"}' 1
want 'vfhealth_reports_total{kind="ok",outcome="unchanged"}' 3
# Per VF: one series per VF per family, labelled vf and parent ("" until known).
want 'vfhealth_vf_out_of_service{vf="0000:41:00.4",parent="0000:41:00.0",reason="failures"}' 1
want 'vfhealth_vf_out_of_service{vf="0000:41:00.5",parent="",reason="held-back"}' 1
want 'vfhealth_vf_out_of_service{vf="0000:41:00.6",parent="",reason=""}' 0
want 'vfhealth_vf_out_of_service{vf="0000:41:01.0",parent="",reason="operator"}' 1
[[ $(grep -c '^vfhealth_vf_out_of_service{' "$T/metrics") == 6 ]] || fail "not one out_of_service series per VF"
want 'vfhealth_vf_failures{vf="0000:41:00.4",parent="0000:41:00.0"}' 2
want 'vfhealth_vf_failures{vf="0000:41:00.5",parent=""}' 2
want 'vfhealth_vf_failures{vf="0000:41:00.7",parent=""}' 0
[[ $(grep -c '^vfhealth_vf_failures{' "$T/metrics") == 6 ]] || fail "not one failures series per VF"
want 'vfhealth_vf_last_check{vf="0000:41:01.1",parent="",result="ok"}' 1
# Every result, not only the reports' ok and failed: vm-f's agent never answers.
want 'vfhealth_vf_last_check{vf="0000:41:00.7",parent="",result="rpc_error"}' 1
[[ $(grep -c '^vfhealth_vf_last_check{' "$T/metrics") == 2 ]] || fail "a last check for a VF whose claim was never checked"
grep -q '^# TYPE vfhealth_vf_out_of_service_since_timestamp_seconds gauge$' "$T/metrics" ||
	fail "no vfhealth_vf_out_of_service_since_timestamp_seconds family"
# since: the VF's own `since` file as a Unix time, for out-of-service VFs only.
for vf in 0000:41:00.4 0000:41:01.0; do
	want "vfhealth_vf_out_of_service_since_timestamp_seconds{vf=\"$vf\",parent=\"$(cat "$mnt/$vf/parent")\"}" \
		"$(date -u -d "$(cat "$mnt/$vf/since")" +%s)"
done
[[ $(grep -c '^vfhealth_vf_out_of_service_since_timestamp_seconds{' "$T/metrics") == 2 ]] ||
	fail "a since series for a VF in service (or held back)"
# ... which is what vfhealth(5) says of the family: the since file's time,
# served (not "none yet").
since_doc=$(sed -n '/^\.B vfhealth_vf_out_of_service_since_timestamp_seconds$/,/^\.TP$/p' \
	"$source_root/docs/man/vfhealth.5")
if ! grep -qx '\.I since' <<<"$since_doc" || grep -qiE 'none yet|not recorded' <<<"$since_doc"; then
	fail "vfhealth(5) does not describe the since series as served: $since_doc"
fi
grep -Eq '^vfhealth_build_info\{version="[0-9][^"]*",libfuse="3\.[0-9.]+",sqlite="3\.[0-9.]+"\} 1$' "$T/metrics" ||
	fail "no vfhealth_build_info with version, libfuse and sqlite"
want 'vfhealth_config_info{threshold="2",max_quarantined="1",mode="enforce"}' 1
for series in vfhealth_sentinel_init_failures_total vfhealth_sentinel_quarantines_total \
	      vfhealth_sentinel_liveness_uncertain_total vfhealth_sentinel_list_errors_total; do
	[[ -n $(metric "$series") ]] || fail "no $series"
done
grep -q '^# TYPE vfhealth_sentinel_checks_total counter$' "$T/metrics" || fail "checks_total is not a counter"
# Every live claim once, by how the sentinel watches it: vm-f polled, vm-g
# (no agent) never dialled.
want 'vfhealth_sentinel_claims{watch="polled"}' 1
want 'vfhealth_sentinel_claims{watch="no_agent"}' 1
for w in uncertain dead no_evidence unconfined; do want "vfhealth_sentinel_claims{watch=\"$w\"}" 0; done
grep -q '^# TYPE vfhealth_sentinel_claims gauge$' "$T/metrics" || fail "vfhealth_sentinel_claims is not a gauge"
want vfhealth_observe_mode 0

# The mode is configuration: the info series follows a switch.
echo observe > "$mnt/mode"
cat "$mnt/metrics" > "$T/metrics"
want 'vfhealth_config_info{threshold="2",max_quarantined="1",mode="observe"}' 1
want vfhealth_observe_mode 1
[[ $(grep -c '^vfhealth_config_info{' "$T/metrics") == 1 ]] || fail "not one config_info series"

echo "metrics OK"
