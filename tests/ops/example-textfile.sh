#!/usr/bin/env bash
# example-textfile.sh - examples/prometheus/vfhealth-textfile.sh against a
# real vfhealthd: it publishes the metrics as DIR/vfhealth.prom (valid for
# promtool, mode 0644, no temporary file left), refreshes it on the next run,
# and removes it (exit 1) once vfhealthd is gone, so that a stale copy never
# looks current.  When node_exporter is installed, its textfile collector
# serves the vfhealth series on a loopback port.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse

publish=$source_root/examples/prometheus/vfhealth-textfile.sh
mnt=$MNT
dir=$T/textfile
mkdir "$dir"
start_daemon --no-sentinel
mkdir "$mnt/0000:41:00.4"

"$publish" --mount "$mnt" --dir "$dir" || fail "publish failed"
prom=$dir/vfhealth.prom
[[ -f $prom && $(stat -c %a "$prom") == 644 ]] || fail "no $prom with mode 644"
grep -qx 'vfhealth_vfs 1' "$prom" || fail "vfhealth_vfs 1 not in $prom"
[[ $(find "$dir" -mindepth 1 | wc -l) == 1 ]] || fail "left files behind: $(ls -a "$dir")"
if command -v promtool >/dev/null; then
	promtool check metrics < "$prom" || fail "promtool check metrics on the published file"
fi

mkdir "$mnt/0000:41:00.5"
"$publish" --mount "$mnt" --dir "$dir" || fail "second publish failed"
grep -qx 'vfhealth_vfs 2' "$prom" || fail "the copy was not refreshed"

if command -v prometheus-node-exporter >/dev/null || command -v node_exporter >/dev/null; then
	ne=$(command -v prometheus-node-exporter || command -v node_exporter)
	scraped() { curl -sf "http://127.0.0.1:$port/metrics" > "$T/scrape" && grep -q '^vfhealth_vfs 2$' "$T/scrape"; }
	ne_serving() {
		scraped && return 0
		kill -0 "$ne_pid" 2>/dev/null && return 1
		return 2 # exited: most likely the port was taken
	}
	served=false
	for _ in 1 2 3; do
		port=$((20000 + RANDOM % 20000))
		"$ne" --web.listen-address="127.0.0.1:$port" --collector.disable-defaults \
			--collector.textfile --collector.textfile.directory="$dir" >"$T/ne.log" 2>&1 &
		ne_pid=$!
		BG_PIDS+=("$ne_pid")
		deadline=$((SECONDS + 20))
		while ((SECONDS < deadline)); do
			rc=0; ne_serving || rc=$?
			((rc == 1)) || break
			sleep 0.05
		done
		if ((rc == 0)); then served=true; break; fi
		kill "$ne_pid" 2>/dev/null || true
	done
	$served || fail "node_exporter did not serve vfhealth_vfs: $(tail -n 5 "$T/ne.log")"
	echo "ok   node_exporter's textfile collector serves the vfhealth series"
else
	echo "note: node_exporter not installed; the collector itself was not run"
fi

stop_daemon
rc=0; "$publish" --mount "$mnt" --dir "$dir" 2>/dev/null || rc=$?
[[ $rc == 1 ]] || fail "publish with vfhealthd gone: exit $rc, want 1"
[[ ! -e $prom ]] || fail "a stale copy was left for node_exporter"
[[ -z $(ls -A "$dir") ]] || fail "left files behind: $(ls -a "$dir")"
echo "textfile OK"
