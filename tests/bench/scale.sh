#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scale.sh BUILD_DIR - the documented maximum holds (docs/limits.md): with
# VFS_MAX (65,536) VFs and 786,432 failures, the figures of docs/benchmarks.md
# "At the documented maximum", one line each, as a ratio against its limit:
#
#   sentinel_poll_no_claims   one sentinel poll with no claims    <= 0.5 s
#   ls_top_dir                ls of the mount's top directory     <= 1 s
#   sigterm_to_exit           SIGTERM until vfhealthd has exited  <= 5 s
#   claim_reads_4096          one sentinel poll's claim reads     <= 0.5 s
#                             (claims, then every assignment file)
#                             with SCALE_CLAIMS (4096) live claims
#
# The ls limit is for the sanitizer build: run it from the ASan build
# (`meson test -C build --benchmark scale --verbose`) for the figures the
# docs quote; a release build is faster on all three.  Populating through
# the store API is slow under ASan, so SCALE_DB may name a database made
# beforehand by a release build's vfbench (the file format is the same):
#   build-rel/tests/bench/vfbench populate /dev/shm/max.db 65536 786432
# It is copied, never changed.  Knobs: SCALE_VFS (65536), SCALE_FAILURES
# (786432), SCALE_ROUNDS (3; each figure is the median).
# Not a timed test: a benchmark() in tests/bench/meson.build.
set -euo pipefail
build=$(cd "${1:?usage: scale.sh BUILD_DIR}" && pwd)
# shellcheck source=../crash/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../crash/lib.sh"
vfbench=${VFBENCH:?VFBENCH must name vfbench (set by meson)}
require_fuse

vfs=${SCALE_VFS:-65536}
failures=${SCALE_FAILURES:-786432}
rounds=${SCALE_ROUNDS:-3}
shm=$T/shm
mount_tmpfs "$shm" 2g

missed=0
# figure NAME VALUE UNIT LIMIT: the ratio is VALUE / LIMIT, target <= 1.
figure() {
	local line
	line=$(awk -v n="$1" -v v="$2" -v u="$3" -v l="$4" 'BEGIN {
		r = v / l
		printf "%s: %s %s (limit: %s %s) ratio %.2f target <= 1.00 [%s]\n", n, v, u, l, u, r, r <= 1 ? "ok" : "MISSED"
	}')
	echo "$line"
	[[ $line == *"[ok]" ]] || missed=$((missed + 1))
}
now_ns() { date +%s%N; }
secs() { awk -v ns="$1" 'BEGIN { printf "%.3f", ns / 1e9 }'; }
median() { printf '%s\n' "$@" | sort -g | sed -n "$((($# + 1) / 2))p"; }

echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname): $(nproc) CPUs, kernel $(uname -r)," \
	"load average $(cut -d' ' -f1-3 /proc/loadavg); build $build"
src=$shm/source.db
if [[ -n ${SCALE_DB:-} ]]; then
	cp -- "$SCALE_DB" "$src"
	[[ ! -e $SCALE_DB.created ]] || cp -- "$SCALE_DB.created" "$src.created"
else
	t0=$(now_ns)
	"$vfbench" populate "$src" "$vfs" "$failures" >/dev/null 2>&1
	echo "#   (populating $vfs VFs and $failures failures through the store API: $(secs $(($(now_ns) - t0))) s)"
fi
DB=$shm/vfhealth.db
fresh_db() { # every daemon starts on the same state
	cp -- "$src" "$DB"
	rm -f -- "$DB-wal" "$DB-shm"
	[[ ! -e $src.created ]] || cp -- "$src.created" "$DB.created"
}
# (cat, not vf_read: with a series per VF, metrics is megabytes, far past
# vfio's 64 KiB)
metric() { awk -v m="$1" '$1 == m { print $2; exit }' "$MNT/metrics"; }
polls_past() { (($(metric vfhealth_sentinel_polls_total) >= $1)); }
# sigterm: STOP_S = seconds from SIGTERM until the daemon has exited (0,
# unmounted).
sigterm() {
	local pid=$DAEMON_PID t0 rc=0
	t0=$(now_ns)
	kill -TERM "$pid"
	wait_until 120 process_gone "$pid" || fail "vfhealthd did not exit within 120 s of SIGTERM"
	STOP_S=$(secs $(($(now_ns) - t0)))
	wait "$pid" || rc=$?
	((rc == 0)) || fail "vfhealthd exited $rc on SIGTERM"
	DAEMON_PID=
	! is_mounted "$MNT" || fail "$MNT still mounted after SIGTERM"
	check_sanitizers
}

poll_s=() ls_s=() stop_s=()
for ((round = 1; round <= rounds; round++)); do
	fresh_db
	t0=$(now_ns)
	start_daemon --threshold 1000 --poll-interval 1 --no-reconcile
	startup=$(($(now_ns) - t0))

	# The first listing after the start (nothing cached), as an operator's ls.
	t0=$(now_ns)
	ls "$MNT" >"$T/ls.out"
	ls_s+=("$(secs $(($(now_ns) - t0)))")
	n=$(grep -c '^0000:' "$T/ls.out")
	((n == vfs)) || fail "the mount lists $n VFs, want $vfs"

	# A poll that began after the daemon was ready: no claims, so its
	# duration is finding the claims and nothing else.
	p0=$(metric vfhealth_sentinel_polls_total)
	wait_for 120 "a second poll" polls_past $((p0 + 2))
	poll_s+=("$(metric vfhealth_sentinel_last_poll_duration_seconds)")

	sigterm
	stop_s+=("$STOP_S")
	echo "#   round $round: startup $(secs "$startup") s, ls ${ls_s[-1]} s, poll ${poll_s[-1]} s," \
		"SIGTERM to exit ${stop_s[-1]} s"
done

# The worst moment to stop: a store-wide change has just dirtied every VF's
# files (a threshold that quarantines them all), so the notifier has
# hundreds of thousands of files to touch through the mount.
fresh_db
start_daemon --threshold 1000 --no-sentinel
t0=$(now_ns)
# (not vfio: under ASan the commit may take longer than its 20 s)
echo "$((failures / vfs > 1 ? failures / vfs : 1))" >"$MNT/threshold" || fail "threshold write"
[[ $(grep -c . "$MNT/quarantined") == "$vfs" ]] || fail "not every VF was quarantined"
echo "#   (the threshold write that quarantines every VF took $(secs $(($(now_ns) - t0))) s)"
sigterm
busy_stop=$STOP_S

# One sentinel poll's claim reads with SCALE_CLAIMS live claims spread over
# the VFs: the claims file, then every assignment file it names (each an
# open, by name, of a claim among every VF).
claims=${SCALE_CLAIMS:-4096}
fresh_db
start_daemon --threshold 1000 --no-sentinel
mapfile -t all < <(grep '^0000:' "$T/ls.out")
step=$((${#all[@]} / claims))
t0=$(now_ns)
for ((i = 0; i < claims; i++)); do echo "pid=$$" >"$MNT/${all[i * step]}/assignments/vm-$i"; done
echo "#   (making $claims claims took $(secs $(($(now_ns) - t0))) s)"
read -r claim_ns n < <("$vfbench" claims "$MNT" "$rounds")
((n == claims)) || fail "one poll read $n claims, want $claims"
sigterm

figure sentinel_poll_no_claims "$(median "${poll_s[@]}")" s 0.5
figure ls_top_dir "$(median "${ls_s[@]}")" s 1
figure sigterm_to_exit "$(median "${stop_s[@]}")" s 5
figure sigterm_to_exit_while_notifying "$busy_stop" s 5
figure claim_reads_$claims "$(secs "$claim_ns")" s 0.5
echo "# $missed figure(s) missed their limit at $vfs VFs and $failures failures"
