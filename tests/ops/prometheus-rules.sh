#!/usr/bin/env bash
# prometheus-rules.sh - the shipped Prometheus files are valid and the alerts
# fire when they should: promtool check rules, the promtool unit tests of the
# alerts (vfhealth.rules.test.yml: each alert fires on its condition and
# stays quiet otherwise), the promtool tests of the DCGM join
# (vfhealth-dcgm.rules.test.yml), and promtool check config on the example
# prometheus.yml; every alert the docs promise exists, has an absolute
# runbook_url and a test where it fires and one where it stays quiet.
# Skips (77) only when promtool is missing.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_cmd promtool:prometheus

dir=$source_root/examples/prometheus
promtool check rules "$dir/vfhealth.rules.yml" || fail "promtool check rules"
# promtool resolves rule_files relative to the test file.
(cd "$dir" && promtool test rules vfhealth.rules.test.yml) || fail "promtool test rules"
(cd "$dir" && promtool check config prometheus.yml) || fail "promtool check config"
# The join of vfhealth's parent with dcgm-exporter's pci_bus_id (the live
# scrape and relabelling: prometheus-dcgm.sh).
promtool check rules "$dir/vfhealth-dcgm.rules.yml" || fail "promtool check rules (DCGM)"
(cd "$dir" && promtool test rules vfhealth-dcgm.rules.test.yml) || fail "promtool test rules (DCGM)"

# Every alert the docs promise exists, by the metric it watches:
# stale or absent metrics, a stalled sentinel, unanswering agents, held-back
# VFs, a GPU whose recovery failed or whose drain does not end, an automatic
# drain that its deadline ended, besides the quarantine, store and breaker
# alerts.
for metric in vfhealth_quarantined_vfs vfhealth_store_unavailable vfhealth_breaker_engaged \
	      vfhealth_sentinel_liveness_uncertain_total vfhealth:sentinel_init_failures:rate1h \
	      vfhealth_textfile_last_success_timestamp_seconds 'absent(vfhealth_textfile_' \
	      vfhealth_sentinel_polls_total 'vfhealth_sentinel_checks_total{result=~"rpc_error|unknown"}' \
	      'vfhealth_vf_out_of_service{reason="held-back"}' vfhealth_held_vfs \
	      'vfhealth_gpu_state{state="failed"} == 1' 'vfhealth_gpu_state{state="draining"} == 1' \
	      vfhealth_gpu_auto_drain_timeouts_total; do
	python3 - "$dir/vfhealth.rules.yml" "$metric" <<'PY' || fail "no alert on $metric"
import re, sys
text = open(sys.argv[1]).read()
# an "- alert:" block whose expr mentions the metric
blocks = re.split(r"\n\s*- (?=alert:|record:)", text)
sys.exit(0 if any(b.startswith("alert:") and re.search(r"expr:(.|\n)*" + re.escape(sys.argv[2]), b.split("annotations:")[0]) for b in blocks) else 1)
PY
done

# Every alert has an absolute runbook_url naming a section of runbook.md, and
# a unit test where it fires and one where it stays quiet.
python3 - "$dir/vfhealth.rules.yml" "$dir/vfhealth.rules.test.yml" "$source_root/docs/runbook.md" <<'PY' || fail "alerts without runbook_url or tests"
import re, sys
rules, tests = open(sys.argv[1]).read(), open(sys.argv[2]).read()
bad = []
blocks = [b for b in re.split(r"\n\s*- (?=alert:|record:)", rules) if b.startswith("alert:")]
for b in blocks:
    name = re.match(r"alert: (\S+)", b).group(1)
    url = re.search(r"runbook_url: '([^']*)'", b)
    if not url or not re.match(r"\{\{ or \$externalLabels\.vfhealth_runbook_base \"https://[^\"]+\" \}\}/", url.group(1)):
        bad.append(f"{name}: runbook_url is not absolute")
    cases = re.findall(r"alertname: " + re.escape(name) + r"\n\s*exp_alerts:(.*)", tests)
    if "[]" not in [c.strip() for c in cases]:
        bad.append(f"{name}: no test where it stays quiet")
    if "" not in [c.strip() for c in cases]:
        bad.append(f"{name}: no test where it fires")
# Every runbook_url anchor is a heading of docs/runbook.md.
anchors = set()
for line in open(sys.argv[3]):
    if line.startswith("#"):
        h = line.lstrip("#").strip().lower()
        anchors.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", h)))
for name, frag in re.findall(r"alert: (\S+)(?:.|\n)*?runbook_url: '[^']*runbook\.md#([^']*)'", rules):
    if frag not in anchors:
        bad.append(f"{name}: runbook.md has no section #{frag}")
for line in bad:
    print("FAIL " + line, file=sys.stderr)
print(f"{len(blocks)} alerts, each with an absolute runbook_url and tests firing and quiet")
sys.exit(1 if bad else 0)
PY
echo "rules OK"
