# SPDX-License-Identifier: MIT
# tests/fs/lib.sh - sourced by the fs integration tests: start and stop a real
# vfhealthd on a private mountpoint and database, assertions, cleanup.
#
# Environment (set by tests/fs/meson.build): VFHEALTHD, VFTOOL.
# Every test skips (exit 77) only when FUSE cannot be mounted here.
set -euo pipefail

: "${VFHEALTHD:?VFHEALTHD must name the vfhealthd binary}"
: "${VFTOOL:?VFTOOL must name the vftool helper}"

# LeakSanitizer reports leaks at exit; a leaking daemon fails its stop.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}

T=$(mktemp -d /tmp/vfhealth-fs.XXXXXX)
chmod 755 "$T" # other users (setpriv) must reach the mountpoint
MNT=$T/mnt
DB=$T/db/vfhealth.db
DAEMON_PID=
EXTRA_MOUNTS=()
BG_PIDS=()
# The file interface alone: the in-process sentinel (tests/sentinel) would
# poll and reconcile the test's claims.  A test may clear this.
DAEMON_ARGS=(--no-sentinel)

# Messages strerror(3) gives for the errnos the interface promises.
EINVAL="Invalid argument"
EBUSY="Device or resource busy"
EIO="Input/output error"
EACCES="Permission denied"
EPERM="Operation not permitted"
EEXIST="File exists"
ENOENT="No such file or directory"

skip() {
	echo "SKIP: $*"
	exit 77
}

fail() {
	echo "FAIL: $*" >&2
	if [[ -s $T/daemon.log ]]; then
		echo "--- vfhealthd log (last 40 lines)" >&2
		tail -n 40 "$T/daemon.log" >&2
	fi
	exit 1
}

# process_gone PID: exited, or a zombie waiting for whoever adopted it.  A
# zombie leader whose other threads still live (stuck in the kernel) is not
# gone: waiting for it would hang.
process_gone() {
	[[ -e /proc/$1 ]] || return 0
	local tasks=("/proc/$1/task/"*)
	((${#tasks[@]} <= 1)) && grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null
}

# abort_mount MOUNT: abort the FUSE connection behind MOUNT (fusectl), so that
# nothing stays blocked on a daemon that can no longer answer.
abort_mount() {
	local dev
	dev=$(awk -v m="$1" '$5 == m { print $3 }' /proc/self/mountinfo | tail -n 1)
	[[ -n $dev ]] || return 0
	[[ -d /sys/fs/fuse/connections/${dev#*:} ]] ||
		mount -t fusectl fusectl /sys/fs/fuse/connections 2>/dev/null || true
	echo 1 >"/sys/fs/fuse/connections/${dev#*:}/abort" 2>/dev/null || true
}

cleanup() {
	local pid m
	for pid in "${BG_PIDS[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
	done
	if [[ -n $DAEMON_PID ]] && ! process_gone "$DAEMON_PID"; then
		kill -KILL "$DAEMON_PID" 2>/dev/null || true
		wait_until 5 process_gone "$DAEMON_PID" || abort_mount "$MNT"
		wait "$DAEMON_PID" 2>/dev/null || true
	fi
	umount -l "$MNT" 2>/dev/null || true
	for m in "${EXTRA_MOUNTS[@]}"; do
		umount -l "$m" 2>/dev/null || true
	done
	rm -rf "$T"
}
trap cleanup EXIT

require_fuse() {
	[[ $(id -u) -eq 0 ]] || skip "mounting with allow_other needs root"
	[[ -c /dev/fuse ]] || skip "no /dev/fuse"
	{ exec 9<>/dev/fuse; } 2>/dev/null || skip "/dev/fuse cannot be opened"
	exec 9>&-
}

# Run "$@" until it succeeds or SECONDS seconds pass (a condition, not a nap).
wait_until() {
	local seconds=$1
	shift
	local deadline=$((SECONDS + seconds))
	until "$@"; do
		((SECONDS < deadline)) || return 1
		sleep 0.02
	done
}

# Start vfhealthd in the foreground (as systemd does) and wait for its
# READY=1 on $NOTIFY_SOCKET.  Extra arguments go before the mountpoint.
start_daemon() {
	local sock=$T/notify.sock fifo=$T/notify.fifo line listener
	rm -f "$fifo"
	mkfifo "$fifo"
	"$VFTOOL" notify-listen "$sock" 20000 >"$fifo" &
	listener=$!
	exec 8<"$fifo"
	read -r -t 10 -u 8 line || fail "notify listener did not start"
	[[ $line == bound ]] || fail "notify listener: $line"
	NOTIFY_SOCKET=$sock "$VFHEALTHD" -f --db "$DB" "${DAEMON_ARGS[@]}" "$@" "$MNT" \
		2>>"$T/daemon.log" &
	DAEMON_PID=$!
	read -r -t 25 -u 8 line || line="nothing"
	exec 8<&-
	wait "$listener" || true
	[[ $line == "ready $DAEMON_PID" ]] || fail "vfhealthd did not report READY=1 (got: $line)"
	mountpoint -q "$MNT" || fail "READY=1 before $MNT was mounted"
}

# UBSan reports do not stop the daemon: look for them in its log.  This
# suite answers for the filesystem's own files; anything else is shown.
check_sanitizers() {
	local own='fs/(vffs|vfiles|notify|main)\.c:[0-9]+:[0-9]+: runtime error'
	if grep -Eq "$own" "$T/daemon.log"; then
		fail "undefined behaviour in the filesystem: $(grep -E "$own" "$T/daemon.log" | head -3)"
	fi
	if grep -q "runtime error" "$T/daemon.log"; then
		echo "WARNING: undefined behaviour outside fs/: $(grep "runtime error" "$T/daemon.log" | sort -u | head -3)" >&2
	fi
}

# SIGTERM: must exit 0 (no leaks either) and leave nothing mounted.
stop_daemon() {
	local rc=0
	kill -TERM "$DAEMON_PID"
	wait "$DAEMON_PID" || rc=$?
	DAEMON_PID=
	((rc == 0)) || fail "vfhealthd exited $rc on SIGTERM"
	! mountpoint -q "$MNT" || fail "$MNT still mounted after SIGTERM"
	check_sanitizers
}

# SIGKILL: the daemon must die promptly whatever it was doing.
crash_daemon() {
	local pid=$DAEMON_PID
	kill -KILL "$pid"
	if ! wait_until 10 process_gone "$pid"; then
		abort_mount "$MNT"
		fail "vfhealthd did not die within 10 s of SIGKILL"
	fi
	wait "$pid" 2>/dev/null || true
	DAEMON_PID=
}

assert_eq() {
	[[ $1 == "$2" ]] || fail "${3:-value}: expected '$2', got '$1'"
}

# The whole content of a file, through cat.
assert_cat() {
	local got
	got=$(cat "$1") || fail "cat $1 failed"
	assert_eq "$got" "$2" "cat $1"
}

assert_match() {
	[[ $1 =~ $2 ]] || fail "${3:-value}: '$1' does not match /$2/"
}

# expect_err MESSAGE COMMAND...: the command fails and says MESSAGE.
expect_err() {
	local msg=$1 out
	shift
	if out=$("$@" 2>&1); then
		fail "'$*' succeeded; expected '$msg'"
	fi
	[[ $out == *"$msg"* ]] || fail "'$*': expected '$msg', got '$out'"
}

# put FILE TEXT: `echo TEXT > FILE` through sh -c, as an operator would.
# coreutils' echo rather than dash's builtin, which reports every failed
# write as "I/O error" whatever the errno.
put() {
	sh -c '/bin/echo "$2" > "$1"' sh "$1" "$2"
}

# putf FILE FORMAT...: printf through sh -c (multi-line commands, no newline).
putf() {
	local file=$1
	shift
	sh -c 'f=$1; shift; /usr/bin/printf "$@" > "$f"' sh "$file" "$@"
}

# as_user UID COMMAND...: run as an unprivileged user with no groups.
as_user() {
	local uid=$1
	shift
	setpriv --reuid="$uid" --regid="$uid" --clear-groups "$@"
}

# Start a background watcher; its pid goes to BG_PIDS for cleanup.
background() {
	"$@" &
	BG_PIDS+=("$!")
}
