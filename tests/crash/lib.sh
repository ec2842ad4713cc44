#!/usr/bin/env bash
# shellcheck disable=SC2034 # the variables are for the scripts that source this
# tests/crash/lib.sh - shared by the crash, fault and adversarial tests: a
# real vfhealthd (as a child of the test) on a private mountpoint, readiness
# taken from its sd_notify READY=1 (an event, not a polled guess), SIGKILL
# and restart, and cleanup that always runs (daemon, stale mounts, tmpfs).
# Source it from bash after `set -euo pipefail`.
#
# Environment (set by the meson.build files):
#   VFHEALTH_BUILD_ROOT   the build directory under test
#   VFHEALTH_SOURCE_ROOT  the source tree
#
# Provides: t_tmp, skip, fail, need_fuse, need_mount_tmpfs, start_daemon,
# kill_daemon, stop_daemon, daemon_pid, wait_until, vfio, vf_read.

build_root=${VFHEALTH_BUILD_ROOT:?run under meson test}
source_root=${VFHEALTH_SOURCE_ROOT:?run under meson test}
vfhealthd_bin=$build_root/daemon/vfhealthd
vfio_bin=$build_root/tests/crash/vfio

t_tmp=$(mktemp -d "${TMPDIR:-/tmp}/vfhealth-proof.XXXXXX")
t_mounts=()      # tmpfs and other mounts to undo, innermost last
t_remove=()      # directories outside t_tmp to remove
daemon_pid=
daemon_mount=
daemon_log=$t_tmp/vfhealthd.log
daemon_env=()    # extra VAR=value for the daemon (e.g. LD_PRELOAD)

skip() { echo "SKIP: $*"; exit 77; }
fail() {
	echo "FAIL: $*" >&2
	if [[ -n $daemon_pid ]] && ! kill -0 "$daemon_pid" 2>/dev/null; then
		echo "(vfhealthd $daemon_pid is no longer running)" >&2
	fi
	if [[ -s $daemon_log ]]; then
		echo "--- vfhealthd log (last 30 lines):" >&2
		tail -n "${FAIL_LOG_LINES:-30}" "$daemon_log" >&2
	fi
	exit 1
}

t_cleanup() {
	local i
	KILL_STUCK_OK=1 stop_daemon || true
	[[ -n ${PROOF_KEEP_LOG:-} && -f $daemon_log ]] && cp -- "$daemon_log" "$PROOF_KEEP_LOG"
	for ((i = ${#t_mounts[@]} - 1; i >= 0; i--)); do
		umount -l "${t_mounts[i]}" 2>/dev/null || true
	done
	rm -rf -- "$t_tmp" "${t_remove[@]}"
}
trap t_cleanup EXIT
trap 'exit 143' TERM INT # through the EXIT trap: meson's timeout sends SIGTERM

# wait_until DESCRIPTION SECONDS COMMAND...: retry COMMAND until it succeeds
# or the deadline passes (for conditions that have no event to wait on).
wait_until() {
	local what=$1 secs=$2 deadline
	shift 2
	deadline=$(($(date +%s%N) + secs * 1000000000))
	until "$@"; do
		(($(date +%s%N) < deadline)) || fail "timed out after ${secs}s waiting for $what"
		sleep 0.01
	done
}

need_fuse() {
	[[ -c /dev/fuse && -r /dev/fuse && -w /dev/fuse ]] || skip "no usable /dev/fuse"
	command -v fusermount3 >/dev/null || skip "no fusermount3"
	grep -qw fuse /proc/filesystems || skip "kernel without FUSE"
	[[ -x $vfhealthd_bin ]] || fail "$vfhealthd_bin was not built"
	[[ -x $vfio_bin ]] || fail "$vfio_bin was not built"
}

# need_mount_tmpfs DIR SIZE: a private tmpfs of SIZE at DIR, or skip when this
# machine does not let us mount (not root, no CAP_SYS_ADMIN).
need_mount_tmpfs() {
	mkdir -p -- "$1"
	mount -t tmpfs -o "size=$2,mode=0755" tmpfs "$1" 2>/dev/null ||
		skip "cannot mount a tmpfs here (needs CAP_SYS_ADMIN)"
	t_mounts+=("$1")
}

# vfio OP PATH [TEXT]: one operation, its result ("ok", "EIO", ...) on stdout;
# "HUNG" when it did not return within 20 s (a wedged mount).
vfio() {
	local rc=0
	timeout -s KILL 20 "$vfio_bin" "$@" || rc=$?
	((rc != 137)) || echo HUNG
	return 0
}

# vf_read PATH: the content of a file on the mount; fails the test unless the
# read succeeds.
vf_read() {
	local out
	out=$(vfio read "$1") || fail "vfio read $1"
	[[ ${out%%$'\n'*} == ok ]] || fail "read $1: ${out%%$'\n'*}"
	printf '%s' "${out#ok$'\n'}"
}

# start_daemon MOUNT DB [ARGS...]: vfhealthd -f as a child, returning once it
# has told NOTIFY_SOCKET it serves the mount.  A stale mount left at MOUNT by
# a killed instance is the daemon's to recover.
start_daemon() {
	local mount=$1 db=$2 sock=$t_tmp/notify.sock line=
	shift 2
	daemon_mount=$mount
	mkdir -p -- "$mount" 2>/dev/null || true # ENOTCONN when stale: the daemon's job
	rm -f -- "$sock"
	coproc NOTIFY { exec "$vfio_bin" notify-wait "$sock" 30; }
	read -r -t 30 line <&"${NOTIFY[0]}" || true
	[[ $line == listening ]] || fail "notify-wait did not start ($line)"
	env "${daemon_env[@]}" NOTIFY_SOCKET="$sock" \
		"$vfhealthd_bin" -f --db "$db" "$@" "$mount" >>"$daemon_log" 2>&1 &
	daemon_pid=$!
	read -r -t 30 line <&"${NOTIFY[0]}" || true
	wait "$NOTIFY_PID" 2>/dev/null || true
	if [[ $line != ready ]]; then
		kill -0 "$daemon_pid" 2>/dev/null || fail "vfhealthd exited before serving $mount"
		fail "vfhealthd did not report ready within 30s ($line)"
	fi
}

# daemon_gone PID: the process has exited (a zombie with no threads left).
daemon_gone() {
	local state
	state=$(awk '/^State:/ { print $2 }' "/proc/$1/status" 2>/dev/null) || return 0
	[[ -z $state ]] && return 0
	[[ $state == Z ]] && (($(find "/proc/$1/task" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l) <= 1))
}

# abort_fuse MOUNT: abort the FUSE connection behind MOUNT (umount -f runs
# fuse's umount_begin, which aborts it even when the unmount itself fails),
# so that no client and no thread stays blocked on it.
abort_fuse() {
	timeout 10 umount -f "$1" 2>/dev/null || true
}

# kill_daemon: SIGKILL and reap; the mount is left stale, as after a crash.
# A daemon that does not finish dying (a thread stuck on its own mount keeps
# the FUSE device open, so the kernel never aborts the connection and every
# client hangs) fails the test, after its stuck threads are shown and the
# connection is aborted by hand -- unless KILL_STUCK_OK=1, which only counts
# it in killed_stuck (for looking past a known bug at what else breaks).
killed_stuck=0
kill_daemon() {
	[[ -n $daemon_pid ]] || return 0
	local pid=$daemon_pid deadline=$(($(date +%s%N) + 5000000000)) t
	kill -KILL "$pid" 2>/dev/null || true
	until daemon_gone "$pid"; do
		if (($(date +%s%N) > deadline)); then
			{
				echo "vfhealthd $pid still not dead 5 s after SIGKILL; its threads:"
				for t in /proc/"$pid"/task/*; do
					echo "  task ${t##*/} $(awk '/^State:/ { print $2, $3 }' "$t/status" 2>/dev/null)"
					sed 's/^/    /' "$t/stack" 2>/dev/null | head -n 8
				done
			} >"$t_tmp/stuck.txt"
			abort_fuse "$daemon_mount"
			wait "$pid" 2>/dev/null || true
			daemon_pid=
			killed_stuck=$((killed_stuck + 1))
			[[ ${KILL_STUCK_OK:-0} == 1 ]] && return 0
			fail "$(cat "$t_tmp/stuck.txt")"
		fi
		sleep 0.01
	done
	wait "$pid" 2>/dev/null || true
	daemon_pid=
}

# stop_daemon: SIGTERM and wait (bounded), SIGKILL when that is not enough,
# then make sure nothing stays mounted.  daemon_status is the exit status
# of a daemon that stopped on its own after SIGTERM, empty otherwise.
daemon_status=
stop_daemon() {
	daemon_status=
	if [[ -n $daemon_pid ]]; then
		local deadline=$(($(date +%s%N) + 20000000000))
		kill -TERM "$daemon_pid" 2>/dev/null || true
		until daemon_gone "$daemon_pid" || (($(date +%s%N) > deadline)); do
			sleep 0.02
		done
		if daemon_gone "$daemon_pid"; then
			daemon_status=0
			wait "$daemon_pid" 2>/dev/null || daemon_status=$?
			daemon_pid=
		else
			kill_daemon
		fi
	fi
	if [[ -n $daemon_mount ]] && grep -qF " $daemon_mount fuse" /proc/mounts; then
		fusermount3 -uz "$daemon_mount" 2>/dev/null || umount -l "$daemon_mount" 2>/dev/null || true
	fi
}

# finish: stop the daemon and fail on what the sanitizers or the daemon said
# on the way: a non-zero exit after SIGTERM (LeakSanitizer exits 23), or a
# sanitizer report anywhere in the log of every instance this test ran.
finish() {
	stop_daemon
	[[ ${daemon_status:-0} == 0 ]] || fail "vfhealthd exited with status $daemon_status after SIGTERM"
	if grep -qE 'runtime error:|ERROR: (Address|Leak|Thread)Sanitizer' "$daemon_log" 2>/dev/null; then
		FAIL_LOG_LINES=60 fail "sanitizer report in the vfhealthd log: $(grep -m1 -E 'runtime error:|ERROR: (Address|Leak|Thread)Sanitizer' "$daemon_log")"
	fi
}
