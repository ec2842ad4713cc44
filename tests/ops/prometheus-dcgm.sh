#!/usr/bin/env bash
# prometheus-dcgm.sh - the DCGM join as a real Prometheus runs it: the
# shipped prometheus.yml (its scrape jobs pointed at local servers, intervals
# shortened, nothing else changed, so its dcgm metric_relabel_configs are
# the ones tested) scrapes a real vfhealthd's metrics (VFs of GPUs
# 0000:41:00.0 and 0000:c1:00.0, one held) as node_exporter would publish
# them and a dcgm-exporter sample whose pci_bus_id is NVML's form
# (00000000:C1:00.0, upper case), evaluates vfhealth-dcgm.rules.yml, and the
# API shows each parent GPU joined with its DCGM identity, as the Grafana
# dashboard's DCGM table queries it.  The rules' own
# cases are promtool tests (prometheus-rules.sh).
# Skips (77) without FUSE, prometheus or curl.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse
require_cmd prometheus:prometheus curl
dir=$source_root/examples/prometheus

# vfhealth's metrics, from a real mount.
mnt=$MNT
# parents come from sysfs physfn links (a fake tree)
for vf in 0000:41:00.4 0000:c1:00.4 0000:c1:00.5; do
	mkdir -p "$T/sys/bus/pci/devices/$vf"
	ln -s "../${vf%.*}.0" "$T/sys/bus/pci/devices/$vf/physfn"
done
start_daemon --no-sentinel --sysfs-root "$T/sys"
for vf in 0000:41:00.4 0000:c1:00.4 0000:c1:00.5; do mkdir "$mnt/$vf"; done
echo 1 > "$mnt/0000:c1:00.5/quarantined"
mkdir -p "$T/node" "$T/dcgm"
cp "$mnt/metrics" "$T/node/metrics"
grep -qF 'vfhealth_vf_out_of_service{vf="0000:c1:00.5",parent="0000:c1:00.0",reason="operator"} 1' "$T/node/metrics" ||
	{ cat "$T/node/metrics" >&2; fail "the held VF is not in the metrics"; }
stop_daemon

# dcgm-exporter's exposition (labels as it writes them).
cat > "$T/dcgm/metrics" <<'EOF'
# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a0",pci_bus_id="00000000:41:00.0",device="nvidia0",modelName="NVIDIA A16",Hostname="gpu-host-1"} 40
DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-a1",pci_bus_id="00000000:C1:00.0",device="nvidia1",modelName="NVIDIA A16",Hostname="gpu-host-1"} 41
# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-a0",pci_bus_id="00000000:41:00.0",device="nvidia0",modelName="NVIDIA A16",Hostname="gpu-host-1"} 0
DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-a1",pci_bus_id="00000000:C1:00.0",device="nvidia1",modelName="NVIDIA A16",Hostname="gpu-host-1"} 79
EOF

read -r node_port dcgm_port prom_port < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
pids=()
reap() { local p; for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
on_exit reap
python3 -m http.server --bind 127.0.0.1 --directory "$T/node" "$node_port" >"$T/node.log" 2>&1 &
pids+=("$!")
python3 -m http.server --bind 127.0.0.1 --directory "$T/dcgm" "$dcgm_port" >"$T/dcgm.log" 2>&1 &
pids+=("$!")

# The shipped configuration, targets and intervals ours, rule files by
# absolute path; the relabelling as shipped.
python3 - "$dir/prometheus.yml" "$T/prometheus.yml" "$dir" "$node_port" "$dcgm_port" <<'PY' || fail "cannot adapt prometheus.yml"
import os, sys, yaml
src, dst, d, node_port, dcgm_port = sys.argv[1:]
cfg = yaml.safe_load(open(src))
cfg["global"]["scrape_interval"] = cfg["global"]["evaluation_interval"] = "1s"
cfg["rule_files"] = [os.path.join(d, f) for f in cfg["rule_files"]]
ports = {"node": node_port, "dcgm": dcgm_port}
jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
assert set(jobs) == set(ports), jobs.keys()
assert "metric_relabel_configs" in jobs["dcgm"]
for name, job in jobs.items():
    job["static_configs"] = [{"targets": ["127.0.0.1:" + ports[name]]}]
yaml.safe_dump(cfg, open(dst, "w"))
PY
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
	--web.listen-address="127.0.0.1:$prom_port" >"$T/prometheus.log" 2>&1 &
pids+=("$!")
prom_pid=$!

# query PROMQL: the result vector as "labels value" lines, sorted.
query() {
	curl -fsS --max-time 5 "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" |
		python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
for s in sorted(r, key=lambda s: sorted(s["metric"].items())):
    m = s["metric"]
    print(",".join(f"{k}={m[k]}" for k in sorted(m)), s["value"][1])'
}
joined() {
	kill -0 "$prom_pid" 2>/dev/null || { cat "$T/prometheus.log" >&2; fail "prometheus exited"; }
	# Any series: both targets were scraped before the rules ran.
	[[ -n $(query 'vfhealth:parent_vfs_out_of_service:dcgm' 2>/dev/null) ]]
}
wait_for 60 "prometheus to scrape and record the join" joined

# DCGM's series carry parent in vfhealth's form.
got=$(query 'DCGM_FI_DEV_GPU_TEMP')
grep -q 'gpu=1,.*parent=0000:c1:00.0,pci_bus_id=00000000:C1:00.0 41$' <<<"$got" ||
	fail "the relabel did not give pci_bus_id 00000000:C1:00.0 parent 0000:c1:00.0: $got"
grep -q 'gpu=0,.*parent=0000:41:00.0,pci_bus_id=00000000:41:00.0 40$' <<<"$got" ||
	fail "the relabel did not give pci_bus_id 00000000:41:00.0 parent 0000:41:00.0: $got"

# Each parent GPU with DCGM's identity and vfhealth's count.
got=$(query 'vfhealth:parent_vfs_out_of_service:dcgm')
want="UUID=GPU-a0,__name__=vfhealth:parent_vfs_out_of_service:dcgm,gpu=0,host=127.0.0.1,modelName=NVIDIA A16,parent=0000:41:00.0 0
UUID=GPU-a1,__name__=vfhealth:parent_vfs_out_of_service:dcgm,gpu=1,host=127.0.0.1,modelName=NVIDIA A16,parent=0000:c1:00.0 1"
[[ $got == "$want" ]] || fail "the join: got
$got
want
$want"
got=$(query 'vfhealth:parent_xid_errors:dcgm')
want="UUID=GPU-a1,__name__=vfhealth:parent_xid_errors:dcgm,gpu=1,host=127.0.0.1,parent=0000:c1:00.0 79"
[[ $got == "$want" ]] || fail "the XID join: got '$got', want '$want'"
# The dashboard's DCGM table (the host and parent-GPU variables at "All")
# shows the same series.
panel_expr=$(python3 - "$source_root/examples/grafana/vfhealth-fleet.json" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
for p in d["panels"]:
    for t in p.get("targets", []):
        if t.get("expr", "").startswith("vfhealth:parent_vfs_out_of_service:dcgm"):
            print(re.sub(r"\$(instance|parent)\b", ".*", t["expr"]))
PY
)
[[ -n $panel_expr ]] || fail "the dashboard has no panel on vfhealth:parent_vfs_out_of_service:dcgm"
got=$(query "$panel_expr" | sed 's/^UUID=GPU-a\([01]\),.*parent=\(.*\)$/GPU-a\1 \2/')
want="GPU-a0 0000:41:00.0 0
GPU-a1 0000:c1:00.0 1"
[[ $got == "$want" ]] || fail "the dashboard's DCGM table: got '$got', want '$want'"
echo "prometheus-dcgm OK"
