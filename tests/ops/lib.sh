#!/usr/bin/env bash
# shellcheck disable=SC2034 # the variables are for the scripts that source this
# tests/ops/lib.sh - shared by the ops tests: a real vfhealthd on a temporary
# mountpoint with a temporary SQLite file, and cleanup that always runs.
# Source it from bash after `set -euo pipefail`.
#
# Environment (set by tests/ops/meson.build):
#   VFHEALTH_BUILD_ROOT   the build directory under test
#   VFHEALTH_SOURCE_ROOT  the source tree
#
# Provides: ops_tmp (a private temporary directory), skip, fail, need_fuse,
# start_vfhealthd MOUNT [ARGS...], stop_vfhealthd, wait_for DESC SECONDS CMD...

build_root=${VFHEALTH_BUILD_ROOT:?run under meson test}
source_root=${VFHEALTH_SOURCE_ROOT:?run under meson test}
vfhealthd_bin=$build_root/daemon/vfhealthd
agent_bin=$build_root/guest-agent/vfhealth-agent
test_vmm_bin=$build_root/tests/sentinel/test-vmm

ops_tmp=$(mktemp -d "${TMPDIR:-/tmp}/vfhealth-ops.XXXXXX")
vfhealthd_pid=
vfhealthd_mount=
ops_cleanup_hooks=()

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; [[ -s $ops_tmp/vfhealthd.log ]] && { echo "--- vfhealthd log:" >&2; tail -n 30 "$ops_tmp/vfhealthd.log" >&2; }; exit 1; }

ops_cleanup() {
	local hook
	for hook in "${ops_cleanup_hooks[@]}"; do eval "$hook" || true; done
	stop_vfhealthd || true
	# Never descend into a mount left behind: a hung one would hang rm.
	detach_mounts_under "$ops_tmp"
	rm -rf -- "$ops_tmp"
}

# detach_mounts_under DIR: abort and detach every mount below DIR (a forced
# unmount aborts a FUSE connection, so nothing stays blocked on it).
detach_mounts_under() {
	local m
	while IFS= read -r m; do
		umount -f "$m" 2>/dev/null || true
		fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done < <(awk -v d="$1/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo)
}
trap ops_cleanup EXIT

# wait_for DESCRIPTION SECONDS COMMAND...: retry COMMAND until it succeeds or
# the deadline passes (a condition, not a fixed sleep).
wait_for() {
	local what=$1 secs=$2 deadline
	shift 2
	deadline=$(($(date +%s%N) + secs * 1000000000))
	until "$@"; do
		(($(date +%s%N) < deadline)) || fail "timed out after ${secs}s waiting for $what"
		sleep 0.05
	done
}

# Skip (77) where this machine cannot mount FUSE file systems.
need_fuse() {
	[[ -c /dev/fuse ]] || skip "no /dev/fuse"
	command -v fusermount3 >/dev/null || skip "no fusermount3"
	[[ -r /dev/fuse && -w /dev/fuse ]] || skip "/dev/fuse not accessible"
	grep -qw fuse /proc/filesystems || skip "kernel without FUSE"
	[[ -x $vfhealthd_bin ]] || fail "$vfhealthd_bin was not built"
}

vfhealthd_ready() {
	mountpoint -q "$vfhealthd_mount" && [[ -e $vfhealthd_mount/status ]] && return 0
	kill -0 "$vfhealthd_pid" 2>/dev/null || fail "vfhealthd exited before mounting"
	return 1
}

# start_vfhealthd MOUNT [ARGS...]: vfhealthd in the foreground (as a child)
# with its database in ops_tmp; returns once MOUNT serves files.
start_vfhealthd() {
	vfhealthd_mount=$1
	shift
	mkdir -p -- "$vfhealthd_mount"
	"$vfhealthd_bin" -f --db "$ops_tmp/vfhealth.db" "$@" "$vfhealthd_mount" \
		>>"$ops_tmp/vfhealthd.log" 2>&1 &
	vfhealthd_pid=$!
	wait_for "vfhealthd to mount $vfhealthd_mount" 20 vfhealthd_ready
}

# is_mounted DIR: from the mount table (mountpoint(1) would stat a dead mount).
is_mounted() {
	awk -v m="$1" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
}

stop_vfhealthd() {
	[[ -n $vfhealthd_pid ]] || return 0
	kill -TERM "$vfhealthd_pid" 2>/dev/null || true
	local deadline=$((SECONDS + 15))
	while kill -0 "$vfhealthd_pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.05; done
	if kill -0 "$vfhealthd_pid" 2>/dev/null; then
		echo "vfhealthd did not stop on SIGTERM; killing it" >&2
		kill -KILL "$vfhealthd_pid" 2>/dev/null || true
		# A daemon blocked on its own mount cannot exit until the FUSE
		# connection is aborted, which a forced unmount does.
		umount -f "$vfhealthd_mount" 2>/dev/null || true
	fi
	wait "$vfhealthd_pid" 2>/dev/null || true
	vfhealthd_pid=
	if is_mounted "$vfhealthd_mount"; then
		fusermount3 -uz "$vfhealthd_mount" 2>/dev/null || umount -l "$vfhealthd_mount" || true
	fi
}

# report_failed MOUNT VF INSTANCE: one failed assignment, as the sentinel
# writes it (assigned_at unknown: "-").
report_failed() {
	printf 'failed %s - NVRM: GPU 0000:00:05.0: RmInitAdapter failed! (0x22:0x65:884)\n' "$3" \
		> "$1/$2/report"
}

# wait_for_line FILE LINE SECONDS: FILE (a watcher's output) gets exactly LINE.
wait_for_line() {
	wait_for "'$2' in $1" "$3" grep -qxF -- "$2" "$1"
}

# write_once FILE CONTENT: CONTENT in one write(2) at offset 0, as vfhealthd
# takes a command (bash's printf writes a multi-line string line by line).
write_once() {
	local tmp
	tmp=$(mktemp "$ops_tmp/write.XXXXXX")
	printf '%s' "$2" > "$tmp"
	cat -- "$tmp" > "$1"
	rm -f -- "$tmp"
}
