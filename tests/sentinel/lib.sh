# SPDX-License-Identifier: MIT
# tests/sentinel/lib.sh - helpers for the sentinel's integration tests: a real
# vfhealthd on a temporary mount and database, real vfhealth-agent processes
# on Unix sockets fed from FIFOs of kmsg records with a fake nvidia-smi, and
# test-vmm processes in front of them.  Sourced by every test-*.sh here.
#
# Programs come from the environment (tests/sentinel/meson.build sets them):
# VFHEALTHD, VFHEALTH_AGENT, VFHEALTH_SENTINEL, TEST_VMM.
#
# Waiting is on conditions with a deadline (wait_for), never a blind sleep.

set -euo pipefail

: "${VFHEALTHD:?}" "${VFHEALTH_AGENT:?}" "${TEST_VMM:?}"

T=$(mktemp -d /tmp/vfsentinel-test.XXXXXX)
MNT=$T/mnt
PIDS=()
EXTRA_MOUNTS=() # unmounted at exit, after the daemon
DAEMON_PID=

skip() {
	echo "SKIP: $*"
	exit 77
}

fail() {
	echo "FAIL: $*" >&2
	local log
	for log in "$T"/*.log; do
		[[ -f $log ]] || continue
		if grep -q "ERROR: AddressSanitizer\|runtime error:" "$log"; then
			echo "--- sanitizer report in $(basename "$log") ---" >&2
			grep -A 24 "ERROR: AddressSanitizer\|runtime error:" "$log" | grep -v '^  0x\|^=>' >&2 || true
		fi
	done
	if [[ -f $T/daemon.log ]]; then
		echo "--- daemon log (last 40 lines) ---" >&2
		tail -n 40 "$T/daemon.log" >&2 || true
	fi
	exit 1
}

cleanup() {
	local pid m
	for pid in "${PIDS[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	# A process that ignores SIGTERM must not hang the test: SIGKILL after 5 s.
	local deadline=$((SECONDS + 5))
	for pid in "${PIDS[@]}"; do
		while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
			sleep 0.05
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "pid $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-80)) ignored SIGTERM" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
		wait "$pid" 2>/dev/null || true
	done
	# Also a mount whose daemon died (ENOTCONN), which mountpoint(1) misses.
	abort_fuse "$MNT"
	for m in "${EXTRA_MOUNTS[@]}"; do
		umount -l "$m" 2>/dev/null || true
	done
	if [[ -n ${VFSENTINEL_KEEP:-} ]]; then
		echo "kept $T"
	else
		rm -rf "$T"
	fi
}
trap cleanup EXIT

require_fuse() {
	[[ -c /dev/fuse ]] || skip "no /dev/fuse"
	[[ -r /dev/fuse && -w /dev/fuse ]] || skip "/dev/fuse not usable"
	command -v fusermount3 >/dev/null || skip "no fusermount3"
}

# abort_fuse MOUNTPOINT [MOUNT_ID]: abort the FUSE connection behind MOUNTPOINT
# (only if it is still connection DEV, "major:minor", when given) and detach
# it.  A crashed vfhealthd whose own threads wait on its mount (the
# sentinel, the notifier) never finishes dying otherwise, and every reader
# of the mount hangs in D state.
abort_fuse() {
	local dev
	# $2, when given, is the mount ID (field 1 of mountinfo) of the mount to
	# abort: unlike the device number, it is not handed to the next mount
	# at once, so a later daemon's mount on the same path is left alone.
	dev=$(awk -v m="$1" -v id="${2:-}" '$5 == m && (id == "" || $1 == id) { print $3 }' \
		/proc/self/mountinfo | tail -n 1)
	[[ -n $dev ]] || return 0
	if [[ -w /sys/fs/fuse/connections/${dev#*:}/abort ]]; then
		echo 1 >"/sys/fs/fuse/connections/${dev#*:}/abort" 2>/dev/null || true
	fi
	umount -l "$1" 2>/dev/null || fusermount3 -uz "$1" 2>/dev/null || true
}

# running PID: the process exists and is not a zombie (kill -0 says yes to
# a child that died and was not reaped yet).
running() {
	local state
	state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null) || return 1
	[[ -n $state && $state != Z ]]
}

# wait_for SECONDS DESCRIPTION COMMAND...: retry COMMAND until it succeeds or
# the deadline passes (then fail with DESCRIPTION).
wait_for() {
	local limit=$1 what=$2
	shift 2
	local deadline=$((SECONDS + limit))
	until "$@"; do
		if [[ -n $DAEMON_PID ]] && ! running "$DAEMON_PID"; then
			fail "vfhealthd died while waiting for: $what"
		fi
		((SECONDS < deadline)) || fail "timed out after ${limit}s waiting for: $what"
		sleep 0.05
	done
}

# start_daemon [vfhealthd options...]: mount $MNT on a fresh database.
start_daemon() {
	require_fuse
	if [[ -n ${WATCHDOG_PID:-} ]]; then
		kill "$WATCHDOG_PID" 2>/dev/null || true
		wait "$WATCHDOG_PID" 2>/dev/null || true
		WATCHDOG_PID=
	fi
	mkdir -p "$MNT"
	"$VFHEALTHD" -f --db "$T/db/vfhealth.db" "$@" "$MNT" >>"$T/daemon.log" 2>&1 &
	DAEMON_PID=$!
	PIDS+=("$DAEMON_PID")
	local deadline=$((SECONDS + 20))
	until [[ -f $MNT/status ]]; do
		if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
			if grep -qiE 'fuse|mount' "$T/daemon.log"; then
				skip "vfhealthd cannot mount here: $(tail -n 3 "$T/daemon.log")"
			fi
			fail "vfhealthd exited at start"
		fi
		((SECONDS < deadline)) || fail "vfhealthd did not mount within 20s"
		sleep 0.05
	done
	# Watchdog: if this daemon dies without unmounting, abort its connection
	# so the test fails instead of hanging.  Device numbers and mount IDs are
	# handed to the next mount at once, so the watchdog must never outlive
	# its daemon into the next one's life: the next start_daemon ends it.
	local pid=$DAEMON_PID mount_id
	mount_id=$(awk -v m="$MNT" '$5 == m { print $1 }' /proc/self/mountinfo | tail -n 1)
	(
		while running "$pid"; do sleep 0.2; done
		abort_fuse "$MNT" "$mount_id"
	) >/dev/null 2>&1 &
	PIDS+=("$!")
	WATCHDOG_PID=$!
}

# stop_daemon: SIGTERM and wait (not in a subshell: it must be our child);
# the exit status is left in STOP_RC.
stop_daemon() {
	STOP_RC=0
	kill -TERM "$DAEMON_PID"
	wait "$DAEMON_PID" || STOP_RC=$?
	DAEMON_PID=
}

# write_once FILE CONTENT: CONTENT in a single write(2) at offset 0, as the
# file interface wants (bash's printf writes line by line).
write_once() {
	local file=$1 content=$2 tmp
	tmp=$(mktemp "$T/write.XXXXXX")
	printf '%s' "$content" >"$tmp"
	cat "$tmp" >"$file"
	rm -f "$tmp"
}

register_vf() {
	mkdir "$MNT/$1"
}

# claim VF INSTANCE KEY=VALUE...: create the claim, then set its keys in one write.
claim() {
	local vf=$1 id=$2 content=""
	shift 2
	: >"$MNT/$vf/assignments/$id"
	local kv
	for kv in "$@"; do
		content+="$kv"$'\n'
	done
	[[ -z $content ]] || write_once "$MNT/$vf/assignments/$id" "$content"
}

release() {
	rm "$MNT/$1/assignments/$2"
}

claimed_at() {
	sed -n 's/^claimed_at=//p' "$MNT/$1/assignments/$2"
}

# metric NAME_WITH_LABELS: its value in $MNT/metrics (or $METRICS_FILE when
# set, for the standalone sentinel); empty when absent.
metric() {
	local file=${METRICS_FILE:-$MNT/metrics}
	[[ -f $file ]] || return 0
	awk -v name="$1" '$1 == name { print $2 }' "$file"
}

# metric_ge NAME N: the metric exists and is >= N.
metric_ge() {
	local v
	v=$(metric "$1")
	[[ -n $v ]] && awk -v v="$v" -v n="$2" 'BEGIN { exit !(v + 0 >= n + 0) }'
}

polls() {
	local v
	v=$(metric vfhealth_sentinel_polls_total)
	echo "${v:-0}"
}

# wait_polls N: wait until N more polls have completed than now.
wait_polls() {
	local target=$(($(polls) + $1))
	wait_for "${2:-30}" "$1 more sentinel polls" metric_ge vfhealth_sentinel_polls_total "$target"
}

file_is() {
	[[ "$(cat "$1")" == "$2" ]]
}

# ---- guest agents ----------------------------------------------------------

# A fake sysfs with one NVIDIA device, shared by every agent.
make_sysfs() {
	if [[ ! -d $T/sysfs ]]; then
		mkdir -p "$T/sysfs/bus/pci/devices/0000:00:03.0"
		echo 0x10de >"$T/sysfs/bus/pci/devices/0000:00:03.0/vendor"
	fi
}

# start_agent NAME: vfhealth-agent on unix:$T/NAME.sock reading kmsg records
# from the FIFO $T/NAME.kmsg; its nvidia-smi succeeds once $T/NAME.smi-ok
# exists (agent_make_ok), fails before.
start_agent() {
	local name=$1
	make_sysfs
	mkfifo "$T/$name.kmsg"
	cat >"$T/$name.nvidia-smi" <<EOF
#!/bin/sh
[ -e "$T/$name.smi-ok" ] && { echo "GPU 0: NVIDIA A100 (UUID: GPU-fake)"; exit 0; }
echo "No devices were found" >&2
exit 6
EOF
	chmod +x "$T/$name.nvidia-smi"
	"$VFHEALTH_AGENT" --listen "unix:$T/$name.sock" --kmsg "$T/$name.kmsg" \
		--sysfs-root "$T/sysfs" --nvidia-smi "$T/$name.nvidia-smi" --dev-dir "$T" \
		--probe-interval "${AGENT_PROBE_INTERVAL:-0.1}" >>"$T/$name.log" 2>&1 &
	PIDS+=("$!")
	wait_for 20 "agent $name listening" test -S "$T/$name.sock"
}

# agent_state NAME: ok | failed | unknown | error (from --query's exit status).
agent_state() {
	local rc=0
	"$VFHEALTH_AGENT" --query "unix:$T/$1.sock" --timeout 2 >/dev/null 2>&1 || rc=$?
	case $rc in
	0) echo ok ;;
	1) echo failed ;;
	2) echo unknown ;;
	*) echo error ;;
	esac
}

agent_is() {
	[[ "$(agent_state "$1")" == "$2" ]]
}

# agent_fail NAME: feed one kernel NVRM failure record; wait until it shows.
agent_fail() {
	local name=$1
	# Bounded: a FIFO write blocks until the agent has it open.
	timeout 20 sh -c 'echo "$1" >"$2"' sh \
		"3,$RANDOM,$((SECONDS * 1000000)),-;NVRM: GPU 0000:00:03.0: RmInitAdapter failed! (0x22:0x65:884)" \
		"$T/$name.kmsg" || fail "agent $name does not read its kmsg FIFO"
	wait_for 20 "agent $name FAILED" agent_is "$name" failed
}

# agent_make_ok NAME: let its nvidia-smi succeed; wait until it says OK.
agent_make_ok() {
	: >"$T/$1.smi-ok"
	wait_for 20 "agent $1 OK" agent_is "$1" ok
}

# ---- VMMs -------------------------------------------------------------------

# start_vmm NAME [test-vmm options...]: hybrid vsock at $T/NAME.hv, control
# socket at $T/NAME.ctl.  Default: proxy to the agent NAME.
start_vmm() {
	local name=$1
	shift
	local args=("$@")
	if [[ ${#args[@]} -eq 0 ]]; then
		args=(--agent "unix:$T/$name.sock")
	fi
	"$TEST_VMM" --hvsock "$T/$name.hv" --control "$T/$name.ctl" "${args[@]}" \
		>>"$T/$name.vmm.log" 2>&1 &
	PIDS+=("$!")
	wait_for 20 "vmm $name sockets" test -S "$T/$name.ctl"
	wait_for 20 "vmm $name sockets" test -S "$T/$name.hv"
}

lines_in() {
	if [[ -f $1 ]]; then wc -l <"$1"; else echo 0; fi
}

# lines_at_least FILE N (for wait_for: evaluated on every try)
lines_at_least() {
	(($(lines_in "$1") >= $2))
}
