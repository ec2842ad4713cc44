#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# npd-check.sh - examples/npd: vfhealth-monitor.json has what
# node-problem-detector's custom plugin monitor requires (checked with a
# JSON parser) and names the check; the check, under dash and bash, against
# a live mount in each state: exit 0 "no VF out of service"; exit 1 naming
# the VFs out of service (held or quarantined) and their parent GPUs
# within 80 bytes; observe mode exit 0 saying what enforcement would do;
# exit 2 with no mount, an unavailable store, a dead mount.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse

check=$source_root/examples/npd/vfhealth-npd-check.sh
json=$source_root/examples/npd/vfhealth-monitor.json

# ---- the monitor config ---------------------------------------------------------

python3 - "$json" "$(basename -- "$check")" <<'EOF' || fail "vfhealth-monitor.json breaks the custom plugin contract"
import json, re, sys
cfg = json.load(open(sys.argv[1]))
duration = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$")
def secs(d):
    unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    return sum(float(v) * unit[u] for v, _, u in re.findall(r"([0-9]+(\.[0-9]+)?)(ns|us|ms|s|m|h)", d))
errors = []
def need(ok, what):
    if not ok:
        errors.append(what)
need(cfg.get("plugin") == "custom", "plugin must be custom")
pc = cfg.get("pluginConfig", {})
for k in ("invoke_interval", "timeout"):
    need(isinstance(pc.get(k), str) and duration.match(pc[k]), "pluginConfig.%s: a Go duration" % k)
need(pc.get("max_output_length") == 80, "pluginConfig.max_output_length: 80")
need(isinstance(pc.get("concurrency"), int) and pc["concurrency"] >= 1, "pluginConfig.concurrency >= 1")
need(isinstance(cfg.get("source"), str) and cfg["source"], "source")
conds = {c.get("type"): c for c in cfg.get("conditions", [])}
need(len(conds) >= 1, "conditions")
for c in conds.values():
    need(all(isinstance(c.get(k), str) and c[k] for k in ("type", "reason", "message")),
         "condition %s: type, reason, message" % c.get("type"))
rules = cfg.get("rules", [])
need(len(rules) >= 1, "rules")
for r in rules:
    need(r.get("type") == "permanent", "rule type permanent")
    need(r.get("condition") in conds, "rule condition %s is one of conditions" % r.get("condition"))
    need(isinstance(r.get("reason"), str) and r["reason"] and r["reason"] != conds.get(r.get("condition"), {}).get("reason"),
         "rule reason, not the condition's default reason")
    need(isinstance(r.get("path"), str) and r["path"].startswith("/") and r["path"].endswith("/" + sys.argv[2]),
         "rule path: the absolute path of %s" % sys.argv[2])
    need(isinstance(r.get("timeout"), str) and duration.match(r["timeout"]) and
         secs(r["timeout"]) <= secs(pc.get("timeout", "0s")), "rule timeout: a duration within pluginConfig.timeout")
need(conds.get("VGPUVFOutOfService", {}).get("message") == "no VF out of service",
     "VGPUVFOutOfService's default message is the check's OK message")
for e in errors:
    print("vfhealth-monitor.json: " + e, file=sys.stderr)
sys.exit(1 if errors else 0)
EOF

# ---- the check, in each state -----------------------------------------------------

# run_check SHELL: the check as NPD runs it; its status in rc, its stdout in out.
run_check() {
	rc=0
	out=$(VFHEALTH_MOUNT=${CHECK_MOUNT:-$MNT} "$1" "$check") || rc=$?
}
# expect SHELL RC OUTPUT-REGEX WHAT
expect() {
	run_check "$1"
	[[ $rc == "$2" ]] || fail "$4 ($1): exit $rc, want $2; said '$out'"
	[[ $out =~ $3 ]] || fail "$4 ($1): said '$out', want /$3/"
	(($(printf '%s\n' "$out" | wc -c) <= 81)) || fail "$4 ($1): more than 80 bytes: '$out'"
	[[ $out != *$'\n'* ]] || fail "$4 ($1): more than one line: '$out'"
}
shells=(dash bash)
both() { local sh; for sh in "${shells[@]}"; do expect "$sh" "$@"; done; }

CHECK_MOUNT=$T/nothing both 2 "^no vfhealth at $T/nothing: No such file or directory$" "no mount"

mount_tmpfs "$T/db" 2m 0700
# parents come from sysfs physfn links (a fake tree)
for vf in 0000:41:00.4 0000:41:00.5 0000:41:00.6 0000:42:00.4; do
	mkdir -p "$T/sys/bus/pci/devices/$vf"
	ln -s "../${vf%.*}.0" "$T/sys/bus/pci/devices/$vf/physfn"
done
start_daemon --no-sentinel --sysfs-root "$T/sys" # the sentinel would poll and release the claims made here
both 0 '^no VF out of service$' "no VF registered"
for vf in 0000:41:00.4 0000:41:00.5 0000:41:00.6 0000:42:00.4; do
	mkdir "$MNT/$vf"
done
both 0 '^no VF out of service$' "VFs in service"

echo 1 >"$MNT/0000:41:00.5/quarantined"
both 1 '^1 VF out of service: 0000:41:00\.5 \(GPU 0000:41:00\.0\)$' "one VF held"

# Quarantined by reports (threshold 1), not only held.
echo 1 >"$MNT/threshold"
/bin/echo "failed vm-1 - NVRM: RmInitAdapter failed" >"$MNT/0000:41:00.4/report"
[[ $(cat "$MNT/0000:41:00.4/state") == quarantined ]] || fail "0000:41:00.4 not quarantined"
both 1 '^2 VFs out of service: 0000:41:00\.4 0000:41:00\.5 \(GPU 0000:41:00\.0\)$' "held and quarantined"

echo 1 >"$MNT/0000:41:00.6/quarantined"
both 1 '^3 VFs out of service: 0000:41:00\.4 0000:41:00\.5 0000:41:00\.6 \(GPU 0000:41:00\.0\)$' "three (78 bytes)"
echo 1 >"$MNT/0000:42:00.4/quarantined"
both 1 '^4 VFs out of service: 0000:41:00\.4 \.\.\. \(GPUs 0000:41:00\.0 0000:42:00\.0\)$' "two GPUs: cut to 80 bytes"

echo observe >"$MNT/mode"
both 0 '^observe mode: enforcing would refuse 4 VFs: 0000:41:00\.4 \.\.\. \(2 GPUs\)$' "observe mode"
for vf in 0000:41:00.4 0000:41:00.5 0000:41:00.6 0000:42:00.4; do echo 0 >"$MNT/$vf/quarantined"; done
both 0 '^no VF out of service \(observe mode\)$' "observe mode, none out"
echo enforce >"$MNT/mode"
both 0 '^no VF out of service$' "back in service"

fill_db_dir
both 2 '^vfhealth store unavailable: ' "store unavailable"

kill_daemon
both 2 "^no vfhealth at $MNT: Transport endpoint" "a dead mount"
echo "npd check OK"
