#!/usr/bin/env bash
# grafana-dashboard.sh - examples/grafana/vfhealth-fleet.json is a dashboard
# whose every PromQL expression is valid: each panel target and the host
# variable's query are extracted, Grafana's variables replaced by values of
# their kind ($__rate_interval by 5m, $instance by .*), and the lot handed to
# `promtool check rules` as one recording rule per expression.  The same
# pipeline must reject a broken expression, so the check is not vacuous.  It
# also checks the dashboard's shape: unique panel ids, every target on the
# ${datasource} variable, and the panels the fleet view needs (out of
# service by host and by parent, a timeline, detection latency, check
# results, store state, parent GPUs joined with dcgm-exporter's, each GPU's
# state and its recoveries by outcome); a
# parent-GPU variable (on the host variable) that every per-VF selector
# filters on.  Skips (77) only when promtool is missing.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_cmd promtool:prometheus

dashboard=$source_root/examples/grafana/vfhealth-fleet.json

# extract DASHBOARD RULES [EXTRA_EXPR]: the recording-rules file, one rule per
# expression; prints how many.
extract() {
	python3 - "$@" <<'PY'
import json, re, sys

dash = json.load(open(sys.argv[1]))
errors, exprs = [], []

def walk(panels):
    for p in panels:
        yield p
        yield from walk(p.get("panels", []))

panels = list(walk(dash.get("panels", [])))
ids = [p.get("id") for p in panels]
if len(ids) != len(set(ids)) or None in ids:
    errors.append("panel ids are missing or not unique")
for p in panels:
    if p.get("type") == "row":
        continue
    if "gridPos" not in p:
        errors.append(f"panel {p.get('title')!r} has no gridPos")
    targets = p.get("targets") or []
    if not targets:
        errors.append(f"panel {p.get('title')!r} has no query")
    for t in targets:
        if (t.get("datasource") or p.get("datasource") or {}).get("uid") != "${datasource}":
            errors.append(f"panel {p.get('title')!r}: a target not on ${{datasource}}")
        if not t.get("expr", "").strip():
            errors.append(f"panel {p.get('title')!r}: a target without expr")
        else:
            exprs.append((p["title"], t["expr"]))
for v in dash.get("templating", {}).get("list", []):
    q = v.get("query")
    q = q.get("query", "") if isinstance(q, dict) else (q or "")
    m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\)\s*", q)
    if m:  # label_values(SELECTOR, LABEL): the selector is PromQL
        exprs.append((f"variable {v['name']}", m.group(1)))
    elif v.get("type") == "query":
        errors.append(f"variable {v['name']}: unexpected query {q!r}")
if len(sys.argv) > 3:
    exprs.append(("injected", sys.argv[3]))

# Grafana's variables, replaced by values of the kind Grafana substitutes.
subst = [
    (r"\$__rate_interval|\$\{__rate_interval\}", "5m"),
    (r"\$__interval|\$\{__interval\}", "1m"),
    (r"\$__range|\$\{__range\}", "1h"),
    (r"\$\{instance(:[a-z]+)?\}|\$instance\b", ".*"),
    (r"\$\{parent(:[a-z]+)?\}|\$parent\b", ".*"),
]
# The parent-GPU variable: a query over a per-VF family's parent label,
# chained on the host variable; every selector of a per-VF family (and of
# the per-parent DCGM join) in a panel filters on it.
variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
pv = variables.get("parent")
pq = pv.get("query") if pv else None
pq = pq.get("query", "") if isinstance(pq, dict) else (pq or "")
if not pv or pv.get("type") != "query" or not re.fullmatch(
        r'\s*label_values\(vfhealth_vf_\w+\{[^}]*instance=~"\$instance"[^}]*\},\s*parent\)\s*', pq):
    errors.append(f"no parent-GPU variable (label_values of a vfhealth_vf_ family by parent, on $instance): {pq!r}")
per_vf = re.compile(r"(vfhealth_vf_\w+|vfhealth:parent_\w+:\w+)(\{[^}]*\})?")
for title, e in exprs:
    if title.startswith("variable "):
        continue
    for m in per_vf.finditer(e):
        if 'parent=~"$parent"' not in (m.group(2) or ""):
            errors.append(f"{title}: {m.group(0)} does not filter on the parent-GPU variable")
rules = []
for n, (title, e) in enumerate(exprs):
    for pat, val in subst:
        e = re.sub(pat, val, e)
    # $1, $2: label_replace's capture groups (Grafana has no such variables).
    if re.search(r"\$(?!\d)", e):
        errors.append(f"{title}: unknown variable in {e!r}")
    rules.append({"record": f"dashboard:expr_{n}", "expr": e})

# The fleet view: what the issue asks the dashboard to show.
text = json.dumps([e for _, e in exprs])
types = {p.get("type") for p in panels}
for what, ok in [
    ("out of service by host", "sum by (instance) (vfhealth_quarantined_vfs" in text),
    ("out of service by host and parent", "by (instance, parent" in text and "vfhealth_vf_out_of_service" in text),
    ("a timeline", bool(types & {"timeseries", "state-timeline"})),
    ("detection latency", 'vfhealth_detection_latency_seconds_bucket{kind=\\"failed\\"' in text
                          and 'vfhealth_detection_latency_seconds_bucket{kind=\\"ok\\"' in text),
    ("check results", "vfhealth_sentinel_checks_total" in text),
    ("store state", "vfhealth_store_unavailable" in text),
    ("parent GPUs joined with DCGM", "vfhealth:parent_vfs_out_of_service:dcgm" in text),
    ("GPU states", all('state=\\"%s\\"' % s in text and "vfhealth_gpu_state{" in text
                       for s in ("serving", "draining", "drained", "recovering", "failed"))),
    ("GPU recoveries by outcome", "vfhealth_gpu_recoveries_total" in text),
]:
    if not ok:
        errors.append(f"no panel shows {what}")

with open(sys.argv[2], "w") as f:
    # JSON is YAML: no quoting questions for the expressions.
    json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, f, indent=1)
for e in errors:
    print("FAIL " + e, file=sys.stderr)
print(len(rules))
sys.exit(1 if errors else 0)
PY
}

n=$(extract "$dashboard" "$T/dashboard.rules.yml") || fail "the dashboard's shape"
((n >= 20)) || fail "only $n expressions found in the dashboard"
promtool check rules "$T/dashboard.rules.yml" >"$T/check.log" 2>&1 ||
	{ cat "$T/check.log" >&2; fail "promtool rejects a dashboard expression"; }
echo "ok   $n dashboard expressions, all valid PromQL"

# The same pipeline rejects a broken expression.
extract "$dashboard" "$T/broken.rules.yml" 'sum by (instance (vfhealth_vfs)' >/dev/null ||
	fail "extraction failed with an injected expression"
if promtool check rules "$T/broken.rules.yml" >/dev/null 2>&1; then
	fail "promtool accepted a broken expression: the check is vacuous"
fi
echo "ok   a broken expression is rejected"
echo "dashboard OK"
