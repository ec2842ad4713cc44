#!/usr/bin/env bash
# metrics.sh - the `metrics` file of a real vfhealthd (with the sentinel on)
# is valid Prometheus exposition format (promtool check metrics, lint
# included) in a state with registered, claimed, quarantined and failing VFs
# and the breaker engaged; it has every series the alert rules use, and the
# values match the state.  Skips (77) only without FUSE or promtool.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse
command -v promtool >/dev/null || skip "promtool not installed (Debian: prometheus)"

mnt=$MNT
start_daemon --poll-interval 0.2 --poll-timeout 0.5
for vf in 0000:41:00.4 0000:41:00.5 0000:41:00.6 0000:41:00.7; do mkdir "$mnt/$vf"; done
echo 1 > "$mnt/max_quarantined"
report_failed "$mnt" 0000:41:00.4 vm-a                   # recorded
report_failed "$mnt" 0000:41:00.4 vm-a                   # unchanged (same assignment)
report_failed "$mnt" 0000:41:00.4 vm-b                   # quarantined
report_failed "$mnt" 0000:41:00.5 vm-c
report_failed "$mnt" 0000:41:00.5 vm-d                   # held back: breaker engaged
echo "ok vm-e -" > "$mnt/0000:41:00.6/report"            # ok, nothing to clear
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
want vfhealth_vfs 4
want vfhealth_quarantined_vfs 1
want vfhealth_store_unavailable 0
want vfhealth_breaker_engaged 1
want 'vfhealth_reports_total{kind="failed",outcome="recorded"}' 3  # vm-a, vm-c, vm-d (held back)
want 'vfhealth_reports_total{kind="failed",outcome="unchanged"}' 1
want 'vfhealth_reports_total{kind="failed",outcome="quarantined"}' 1
want 'vfhealth_reports_total{kind="ok",outcome="unchanged"}' 1
for series in vfhealth_sentinel_init_failures_total vfhealth_sentinel_quarantines_total \
	      vfhealth_sentinel_liveness_uncertain_total vfhealth_sentinel_list_errors_total; do
	[[ -n $(metric "$series") ]] || fail "no $series"
done
grep -q '^# TYPE vfhealth_sentinel_checks_total counter$' "$T/metrics" || fail "checks_total is not a counter"

echo "metrics OK"
