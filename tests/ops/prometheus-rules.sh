#!/usr/bin/env bash
# prometheus-rules.sh - the shipped Prometheus files are valid and the alerts
# fire when they should: promtool check rules, the promtool unit tests of the
# alerts (vfhealth.rules.test.yml: each alert fires on its condition and
# stays quiet otherwise), and promtool check config on the example
# prometheus.yml.  Skips (77) only when promtool is missing.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
command -v promtool >/dev/null || skip "promtool not installed (Debian: prometheus)"

dir=$source_root/examples/prometheus
promtool check rules "$dir/vfhealth.rules.yml" || fail "promtool check rules"
# promtool resolves rule_files relative to the test file.
(cd "$dir" && promtool test rules vfhealth.rules.test.yml) || fail "promtool test rules"
(cd "$dir" && promtool check config prometheus.yml) || fail "promtool check config"

# Every alert the issue asks for exists, by the metric it watches.
for metric in vfhealth_quarantined_vfs vfhealth_store_unavailable vfhealth_breaker_engaged \
	      vfhealth_liveness_uncertain_total vfhealth:sentinel_init_failures:rate1h; do
	python3 - "$dir/vfhealth.rules.yml" "$metric" <<'PY' || fail "no alert on $metric"
import re, sys
text = open(sys.argv[1]).read()
# an "- alert:" block whose expr mentions the metric
blocks = re.split(r"\n\s*- (?=alert:|record:)", text)
sys.exit(0 if any(b.startswith("alert:") and re.search(r"expr:.*" + re.escape(sys.argv[2]), b) for b in blocks) else 1)
PY
done
echo "rules OK"
