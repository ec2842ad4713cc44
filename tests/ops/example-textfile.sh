#!/usr/bin/env bash
# example-textfile.sh - examples/prometheus/vfhealth-textfile.sh against a
# real vfhealthd: it publishes the metrics as DIR/vfhealth.prom (valid for
# promtool, mode 0644, no temporary file left) with its own freshness series,
# refreshes it on the next run, and once vfhealthd is gone keeps the last
# vfhealth series (exit 1) while marking the run failed and leaving the last
# success time where it was, so the staleness alert can fire and nothing goes
# blind.  A symlink planted in the directory is never written or read
# through.  When node_exporter is installed, its textfile collector serves
# the vfhealth series on a loopback port, and after a quarantine the per-VF
# series with their labels (promtool check metrics passes on the live file).
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
value() { awk -v m="$1" '$1 == m { print $2 }' "$prom"; }
[[ $(value vfhealth_textfile_scrape_ok) == 1 ]] || fail "scrape_ok is not 1 after a good run"
first_success=$(value vfhealth_textfile_last_success_timestamp_seconds)
[[ -n $first_success && $first_success -gt 0 && $first_success -le $(date +%s) ]] ||
	fail "bad last_success_timestamp_seconds: '$first_success'"
[[ $(value vfhealth_textfile_last_run_timestamp_seconds) == "$first_success" ]] ||
	fail "a good run's last_run differs from its last_success"
[[ $(find "$dir" -mindepth 1 | wc -l) == 1 ]] || fail "left files behind: $(ls -a "$dir")"
promtool_check() {
	if command -v promtool >/dev/null; then
		promtool check metrics < "$prom" || fail "promtool check metrics on the published file"
	fi
}
promtool_check

mkdir "$mnt/0000:41:00.5"
# A symlink planted where the copy goes is replaced, not written through.
echo precious > "$T/victim"
ln -sf -- "$T/victim" "$prom"
"$publish" --mount "$mnt" --dir "$dir" || fail "second publish failed"
[[ $(cat "$T/victim") == precious ]] || fail "the publisher wrote through a symlink"
[[ -f $prom && ! -L $prom ]] || fail "$prom is not a regular file after the run"
grep -qx 'vfhealth_vfs 2' "$prom" || fail "the copy was not refreshed"
[[ $(stat -c %a "$prom") == 644 ]] || fail "the refreshed copy is not 0644"
second_success=$(value vfhealth_textfile_last_success_timestamp_seconds)

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
	# After a quarantine, the collector serves the per-VF series with their labels.
	report_failed "$mnt" 0000:41:00.4 vm-a
	report_failed "$mnt" 0000:41:00.4 vm-b
	"$publish" --mount "$mnt" --dir "$dir" || fail "publish after the quarantine failed"
	promtool_check
	quarantine_served() {
		curl -sf "http://127.0.0.1:$port/metrics" > "$T/scrape" &&
			grep -q '^vfhealth_vf_out_of_service{[^}]*reason="failures"[^}]*} 1$' "$T/scrape"
	}
	wait_for 20 "node_exporter to serve the quarantine" quarantine_served
	series() { grep "^$1{" "$T/scrape" | sed 's/ [^ ]*$//'; }
	has_labels() { # FAMILY VALUE LABEL=VALUE...: one series of FAMILY with these labels
		local family=$1 value=$2 line
		shift 2
		while IFS= read -r line; do
			local l ok=true
			for l in "$@"; do [[ $line == *"${l%%=*}=\"${l#*=}\""* ]] || ok=false; done
			$ok && grep -qxF -- "$line $value" "$T/scrape" && return 0
		done < <(series "$family")
		fail "node_exporter serves no $family{$*} $value: $(grep "^$family" "$T/scrape")"
	}
	has_labels vfhealth_vf_out_of_service 1 vf=0000:41:00.4 reason=failures
	has_labels vfhealth_vf_out_of_service 0 vf=0000:41:00.5
	has_labels vfhealth_vf_failures 2 vf=0000:41:00.4
	has_labels vfhealth_build_info 1 version="$(grep -oP "version: '\K[^']+" "$source_root/meson.build" | head -n 1)"
	has_labels vfhealth_config_info 1 threshold=2 mode=enforce
	echo "ok   node_exporter serves the per-VF series with their labels after a quarantine"
	second_success=$(value vfhealth_textfile_last_success_timestamp_seconds) # that publish succeeded
else
	echo "note: node_exporter not installed; the collector itself was not run"
fi

stop_daemon
before=$(grep -v '^vfhealth_textfile_\|^# [A-Z]* vfhealth_textfile_' "$prom")
rc=0; "$publish" --mount "$mnt" --dir "$dir" 2>/dev/null || rc=$?
[[ $rc == 1 ]] || fail "publish with vfhealthd gone: exit $rc, want 1"
[[ -f $prom ]] || fail "the copy was removed: the alerts would go blind"
after=$(grep -v '^vfhealth_textfile_\|^# [A-Z]* vfhealth_textfile_' "$prom")
[[ $before == "$after" ]] || fail "the last vfhealth series were not kept as they were"
grep -qx 'vfhealth_vfs 2' "$prom" || fail "vfhealth_vfs 2 lost"
[[ $(value vfhealth_textfile_scrape_ok) == 0 ]] || fail "scrape_ok is not 0 with vfhealthd gone"
[[ $(value vfhealth_textfile_last_success_timestamp_seconds) == "$second_success" ]] ||
	fail "last_success moved although nothing was read"
(($(value vfhealth_textfile_last_run_timestamp_seconds) >= second_success)) || fail "last_run did not advance"
[[ $(grep -c '^vfhealth_textfile_scrape_ok ' "$prom") == 1 ]] || fail "the publisher's own series were duplicated"
if command -v promtool >/dev/null; then
	promtool check metrics < "$prom" || fail "promtool check metrics on the kept copy"
fi
# Again, with a symlink to a secret planted at the copy: the secret is
# neither read into the world-readable copy nor overwritten.
echo 'vfhealth_secret 42' > "$T/secret"
chmod 0600 "$T/secret"
ln -sf -- "$T/secret" "$prom"
rc=0; "$publish" --mount "$mnt" --dir "$dir" 2>/dev/null || rc=$?
[[ $rc == 1 ]] || fail "publish with vfhealthd gone: exit $rc, want 1"
[[ -f $prom && ! -L $prom ]] || fail "$prom is not a regular file"
! grep -q vfhealth_secret "$prom" || fail "the publisher copied a file through a symlink"
[[ $(cat "$T/secret") == 'vfhealth_secret 42' ]] || fail "the publisher wrote through a symlink"
[[ $(value vfhealth_textfile_last_success_timestamp_seconds) == 0 ]] || fail "a success was invented"
[[ -z $(find "$dir" -mindepth 1 -name '.*') ]] || fail "left temporary files behind: $(ls -a "$dir")"
echo "textfile OK"
