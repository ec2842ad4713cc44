#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# npd-check.sh - examples/npd: vfhealth-monitor.json has what
# node-problem-detector's custom plugin monitor requires (checked with a
# JSON parser) and names the check for each condition; the check, under
# dash and bash, against a live mount in each state, for both conditions
# (VGPUVFOutOfService: any VF out; VGPUNodeUnfit: every VF out): VFs out
# of service for every reason (quarantined, held, held back, on a draining
# or drained GPU) named within 80 bytes; a claimed VF is in service, so a
# busy node is fit; observe mode says what enforcing would refuse, but a
# GPU's drain counts in it too; no mount, an unavailable store, a dead
# mount: Unknown, and unfit for VGPUNodeUnfit; a SIGSTOPped vfhealthd: both
# answer within their deadline, leave no process behind, and a check that
# finds an earlier one still holding the lock does not queue behind it.
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
need(conds.get("VGPUNodeUnfit", {}).get("message") == "not every VF out of service",
     "VGPUNodeUnfit's default message is the check's OK message")
need(sorted((r.get("condition"), r.get("args") or []) for r in rules) ==
     [("VGPUNodeUnfit", ["unfit"]), ("VGPUVFOutOfService", [])],
     "one rule per condition: the check, and the check with the argument unfit")
for e in errors:
    print("vfhealth-monitor.json: " + e, file=sys.stderr)
sys.exit(1 if errors else 0)
EOF

# ---- the check, in each state -----------------------------------------------------

export VFHEALTH_NPD_LOCK=$T/npd.lock VFHEALTH_TIMEOUT=2
# run_check SHELL [unfit]: the check as NPD runs it; its status in rc, its stdout in out.
run_check() {
	rc=0
	out=$(VFHEALTH_MOUNT=${CHECK_MOUNT:-$MNT} "$1" "$check" ${2:+"$2"}) || rc=$?
}
# expect SHELL RC OUTPUT-REGEX WHAT [unfit]
expect() {
	run_check "$1" "${5:-}"
	[[ $rc == "$2" ]] || fail "$4 ($1 ${5:-}): exit $rc, want $2; said '$out'"
	[[ $out =~ $3 ]] || fail "$4 ($1 ${5:-}): said '$out', want /$3/"
	(($(printf '%s\n' "$out" | wc -c) <= 81)) || fail "$4 ($1 ${5:-}): more than 80 bytes: '$out'"
	[[ $out != *$'\n'* ]] || fail "$4 ($1 ${5:-}): more than one line: '$out'"
	pass "$4 ($1 ${5:-}): exit $2, one line matching /$3/"
}
shells=(dash bash)
# both RC REGEX WHAT [unfit]: under each shell
both() { local sh; for sh in "${shells[@]}"; do expect "$sh" "$1" "$2" "$3" "${4:-}"; done; }
# fit WHAT: the node is fit (VGPUNodeUnfit OK)
fit() { both 0 '^not every VF out of service$' "$1" unfit; }

CHECK_MOUNT=$T/nothing both 2 "^no vfhealth at $T/nothing: No such file or directory$" "no mount"
CHECK_MOUNT=$T/nothing both 1 "^no vfhealth at $T/nothing: No such file or directory$" "no mount" unfit

mount_tmpfs "$T/db" 2m 0700
# parents come from sysfs physfn links (a fake tree); the PFs are NVIDIA
# GPUs with SR-IOV, so that they can be drained
for vf in 0000:41:00.4 0000:41:00.5 0000:41:00.6 0000:42:00.4; do
	pf=${vf%.*}.0
	mkdir -p "$T/sys/bus/pci/devices/$vf" "$T/sys/bus/pci/devices/$pf"
	echo 0x10de >"$T/sys/bus/pci/devices/$pf/vendor"
	echo 16 >"$T/sys/bus/pci/devices/$pf/sriov_totalvfs"
	ln -s "../$pf" "$T/sys/bus/pci/devices/$vf/physfn"
	ln -s "../$vf" "$T/sys/bus/pci/devices/$pf/virtfn${vf##*.}"
done
# VFs are registered by hand here (mkdir), after the check saw none
start_daemon --no-sentinel --register manual --sysfs-root "$T/sys" # the sentinel would poll and release the claims made here
both 0 '^no VF out of service$' "no VF registered"
fit "no VF registered"
for vf in 0000:41:00.4 0000:41:00.5 0000:41:00.6 0000:42:00.4; do
	mkdir "$MNT/$vf"
done
both 0 '^no VF out of service$' "VFs in service"
fit "VFs in service"

echo 1 >"$MNT/0000:41:00.5/quarantined"
both 1 '^1 VF out of service: 0000:41:00\.5 held$' "one VF held"

# Quarantined by reports (threshold 1), and held back by the breaker.
echo 1 >"$MNT/threshold"
echo 1 >"$MNT/max_quarantined"
/bin/echo "failed vm-1 - NVRM: RmInitAdapter failed" >"$MNT/0000:41:00.4/report"
/bin/echo "failed vm-2 - NVRM: RmInitAdapter failed" >"$MNT/0000:41:00.6/report"
[[ $(cat "$MNT/0000:41:00.4/state") == quarantined ]] || fail "0000:41:00.4 not quarantined"
[[ $(cat "$MNT/0000:41:00.6/state") == held-back ]] || fail "0000:41:00.6 not held back"
both 1 '^3 VFs out of service: 0000:41:00\.4 quarantined, 0000:41:00\.5 held, \.\.\.$' "held, quarantined, held back"
fit "three of four out"

# A busy node is fit: the last VF claimed by a running VM is in service.
: >"$MNT/0000:42:00.4/assignments/vm-7"
fit "the last VF claimed"
both 1 '^3 VFs out of service: ' "the last VF claimed"

# Its GPU drained while the VM runs (draining): every VF out.
echo 1 >"$MNT/gpus/0000:42:00.0/drain"
[[ $(cat "$MNT/gpus/0000:42:00.0/state") == draining ]] || fail "0000:42:00.0 not draining"
both 1 '^all 4 VFs out of service: GPU 0000:42:00\.0 draining, \.\.\.$' \
	"every VF out, one on a draining GPU" unfit
both 1 '^4 VFs out of service: GPU 0000:42:00\.0 draining, 0000:41:00\.4 quarantined, \.\.\.$' \
	"every VF out, one on a draining GPU"
rm "$MNT/0000:42:00.4/assignments/vm-7"
[[ $(cat "$MNT/gpus/0000:42:00.0/state") == drained ]] || fail "0000:42:00.0 not drained"
both 1 '^all 4 VFs out of service: GPU 0000:42:00\.0 drained, ' "one on a drained GPU" unfit

# Observe mode: the VFs' own reasons would refuse, the drain does.
echo observe >"$MNT/mode"
both 0 '^observe mode: enforcing would refuse all 4 VFs: GPU 0000:42:00\.0 drained, ' \
	"observe mode" unfit
both 1 '^1 VF out of service: GPU 0000:42:00\.0 drained$' "observe mode, a drained GPU"
echo 0 >"$MNT/gpus/0000:42:00.0/drain"
both 0 '^observe mode: enforcing would refuse 3 VFs: 0000:41:00\.4 quarantined, ' "observe mode"
for vf in 0000:41:00.4 0000:41:00.5 0000:41:00.6 0000:42:00.4; do echo 0 >"$MNT/$vf/quarantined"; done
both 0 '^no VF out of service \(observe mode\)$' "observe mode, none out"
echo enforce >"$MNT/mode"
both 0 '^no VF out of service$' "back in service"
fit "back in service"

# Every GPU drained: unfit, whatever the VFs' own state.
echo 1 >"$MNT/gpus/0000:41:00.0/drain"
echo 1 >"$MNT/gpus/0000:42:00.0/drain"
both 1 '^all 4 VFs out of service: GPU 0000:41:00\.0 drained, GPU 0000:42:00\.0 drained$' \
	"every GPU drained" unfit
echo 0 >"$MNT/gpus/0000:41:00.0/drain"
echo 0 >"$MNT/gpus/0000:42:00.0/drain"

# leftovers: a check's reader of the mount still running, one per line.
leftovers() {
	pgrep -af -- "--read $MNT\$|(cat|ls) -(1 )?-- $MNT" || true
}

# A hung vfhealthd: each answers within its deadline, nothing is left.
kill -STOP "$DAEMON_PID"
for cond in "" unfit; do
	start=$SECONDS
	want=2
	[[ -z $cond ]] || want=1
	both "$want" "^vfhealth at $MNT not answering within 2s$" "a stopped vfhealthd" "$cond"
	((SECONDS - start < 30)) || fail "a stopped vfhealthd: the checks took $((SECONDS - start)) s"
done
[[ -z $(leftovers) ]] || fail "processes left behind by checks on a stopped vfhealthd: $(leftovers)"
# An earlier check still holding the lock: no second one queues behind it.
# (the holder is the process with the lock's descriptor: killing it frees the lock)
bash -c 'exec 7>>"$1" && flock 7 && exec sleep 30' bash "$VFHEALTH_NPD_LOCK" &
holder=$!
BG_PIDS+=("$holder")
lock_taken() { ! flock -n "$VFHEALTH_NPD_LOCK" true; }
wait_for 10 "the lock taken" lock_taken
both 2 "^vfhealth at $MNT not answering \(an earlier check waits\)$" "the lock held"
kill "$holder"
wait "$holder" 2>/dev/null || true
kill -CONT "$DAEMON_PID"
both 0 '^no VF out of service$' "vfhealthd going on"

fill_db_dir
both 2 '^vfhealth store unavailable: ' "store unavailable"
both 1 '^vfhealth store unavailable: ' "store unavailable" unfit

kill_daemon
both 2 "^no vfhealth at $MNT: Transport endpoint" "a dead mount"
both 1 "^no vfhealth at $MNT: Transport endpoint" "a dead mount" unfit
echo "npd check OK"
