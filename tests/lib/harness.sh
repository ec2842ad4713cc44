# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# shellcheck disable=SC2034 # the variables are for the scripts that source this
# tests/lib/harness.sh - the one harness every shell suite sources (directly
# or through its suite's lib.sh): a private temporary directory and a cleanup
# that always runs (EXIT, and SIGTERM/SIGINT from meson's timeout), skip and
# fail, waiting on conditions with a deadline, and a real vfhealthd on a
# private mountpoint and database: started (ready when it says READY=1 on
# $NOTIFY_SOCKET, as systemd sees it), stopped (SIGTERM: exit status 0, its
# mount gone, no sanitizer report in its log), killed (SIGKILL: it must die
# promptly and leave a stale mount, as after a crash).
#
# Programs come only from the environment, which meson sets (tests/lib/
# meson.build): VFHEALTHD, VFHEALTH_SENTINEL, VFHEALTH_AGENT, VFTOOL, and
# per suite TEST_VMM, VFIO, ...  No script knows where the build puts them.
#
# Variables a test reads or sets before start_daemon:
#   T            the private temporary directory (mode 755: setpriv users reach it)
#   MNT DB       the mountpoint and database (the daemon creates their directories)
#   DAEMON_ARGS  vfhealthd options put before the ones start_daemon is given
#   SOCKET_DIRS  the --socket-dir directories the daemon (and its sentinel)
#                confine claims' socket paths to: ($T) by default, so claims
#                name sockets under T; () for the built-in defaults.
#                socket_dir_args prints them as options, one per line.
#   DAEMON_ENV   VAR=value pairs for the daemon's environment (LD_PRELOAD=...)
#   DAEMON_LOG   the daemon's stdout and stderr, every instance appended
#   DAEMON_PID   the running daemon (empty when none)
#   DAEMON_STATUS  the STATUS= text its READY=1 carried ("" when none)
#   DAEMON_STARTUP_US  microseconds from the daemon's start to its READY=1,
#                the listener's own start not counted
#   DAEMON_NOTIFY_LOG  a file: when set, every STATUS= the daemon sends, at
#                READY=1 and after, is appended to it as "status TEXT"
#   DAEMON_WATCHDOG=1  abort the mount of a daemon that dies without unmounting
#   BG_PIDS      background processes: SIGTERM, then SIGKILL after 5 s, at exit
#   EXTRA_MOUNTS mounts to undo at exit, innermost last
#   KILL_DEADLINE  seconds a SIGKILLed daemon may take to die (10)
#   VFHEALTH_KEEP=1  keep T (and say where) instead of removing it
#
# Output is TAP (meson's protocol: 'tap'), so meson names the assertion
# that failed: every assertion prints "ok - what" or "not ok - what" on
# the TAP stream (the script's stdout as it started), and the exit prints the
# plan "1..N".  Everything else the script writes to stdout goes to stderr,
# so a test's own output never reads as TAP.  A test that dies (set -e, a
# signal) ends with a "not ok" naming the status and the command; a skip is
# "1..0 # SKIP why" (or a skipped last test) and exit status 0, as TAP says.
# Assertions: pass, fail, not_ok (a failure that lets the test go on),
# assert_eq, assert_match, expect_err, wait_for; a suite's own helpers call
# pass and fail.
#
# Functions: skip, require_cmd, fail, pass, not_ok, assert_eq, assert_match, expect_err,
# on_exit, require_fuse, mount_tmpfs, wait_until,
# wait_for, process_gone, process_running, is_mounted, abort_mount,
# detach_mounts_under, start_daemon, stop_daemon, kill_daemon,
# check_sanitizers, background, write_once, socket_dir_args; and the errno
# messages EINVAL,
# EBUSY, ... as strerror(3) spells them.
set -euo pipefail

T=$(mktemp -d "${TMPDIR:-/tmp}/vfhealth-test.XXXXXX")
chmod 755 "$T"
# The TAP stream is fd TAP_FD; the script's stdout becomes its stderr.  The
# record of results is a file, one character a result ("o" ok, "x" not ok),
# so that an assertion in a subshell or a background job counts too.
exec {TAP_FD}>&1 1>&2
TAP_RECORD=$T/.tap
: >"$TAP_RECORD"
HARNESS_ERR=
MNT=$T/mnt
DB=$T/db/vfhealth.db
DAEMON_ARGS=()
SOCKET_DIRS=("$T")
DAEMON_ENV=()
DAEMON_LOG=$T/daemon.log
DAEMON_PID=
DAEMON_STATUS=
DAEMON_STARTUP_US=
DAEMON_MNT=
DAEMON_WATCHDOG=${DAEMON_WATCHDOG:-}
WATCHDOG_PID=
BG_PIDS=()
EXTRA_MOUNTS=()
EXIT_HOOKS=()
KILL_DEADLINE=${KILL_DEADLINE:-10}
STOP_DEADLINE=30
killed_stuck=0

# LeakSanitizer reports leaks at exit; a leaking daemon fails its stop.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}

# Messages strerror(3) gives for the errnos the interface promises.
EINVAL="Invalid argument"
EBUSY="Device or resource busy"
EIO="Input/output error"
EACCES="Permission denied"
EPERM="Operation not permitted"
EEXIST="File exists"
ENOENT="No such file or directory"

# ThreadSanitizer (the TSan build, dev.sh): every report is kept (it does not
# stop the process) and fails the test that caused it, as ASan's do.
export TSAN_OPTIONS=${TSAN_OPTIONS:-second_deadlock_stack=1}

# What a sanitizer writes first when it reports (UBSan, ASan, LSan, TSan).
SANITIZER_RE='runtime error:|ERROR: (Address|Leak|Thread)Sanitizer|WARNING: ThreadSanitizer'

# _tap_result o|x WHAT: record a result and print its TAP line (one line:
# newlines shown as \n, a "#" would start a TAP directive).  The lines
# carry no number: meson numbers them in the order they come, which a
# background job's result printed between two of ours cannot upset, and
# no fork is spent on a lock (an assertion costs builtins only).
_tap_result() {
	local what=${2//$'\n'/\\n}
	what=${what//#/(hash)}
	((${#what} <= 200)) || what="${what:0:197}..."
	printf %s "$1" >>"$TAP_RECORD"
	if [[ $1 == o ]]; then
		printf 'ok - %s\n' "$what" >&"$TAP_FD"
	else
		printf 'not ok - %s\n' "$what" >&"$TAP_FD"
	fi
}

# _tap_record: the results so far, one character each, in REPLY.
_tap_record() {
	REPLY=
	read -r REPLY <"$TAP_RECORD" || true
}

# pass WHAT: an assertion that held.
pass() {
	_tap_result o "$*"
}

# not_ok WHAT: an assertion that failed, the test going on to the next (its
# exit status is 1 all the same).
not_ok() {
	echo "FAIL: $*" >&2
	_tap_result x "$*"
}

skip() {
	echo "SKIP: $*"
	HARNESS_SKIP=$*
	exit 77
}

# The evidence a failure shows: sanitizer reports in any log under T, then
# the tail of the daemon's log (FAIL_LOG_LINES lines, 40 by default).
_show_logs() {
	local log
	for log in "$T"/*.log; do
		[[ -f $log ]] || continue
		if grep -qE "$SANITIZER_RE" "$log"; then
			echo "--- sanitizer report in $(basename "$log") ---" >&2
			grep -E -A 24 "$SANITIZER_RE" "$log" | grep -v '^  0x\|^=>' >&2 || true
		fi
	done
	if [[ -n $DAEMON_PID ]] && process_gone "$DAEMON_PID"; then
		echo "(vfhealthd $DAEMON_PID is no longer running)" >&2
	fi
	if [[ -s $DAEMON_LOG ]]; then
		echo "--- $(basename "$DAEMON_LOG") (last ${FAIL_LOG_LINES:-40} lines) ---" >&2
		tail -n "${FAIL_LOG_LINES:-40}" "$DAEMON_LOG" >&2 || true
	fi
}

# fail WHAT: an assertion that failed; the test ends.
fail() {
	not_ok "$*"
	_show_logs
	exit 1
}

# assert_eq GOT WANT [WHAT]
assert_eq() {
	[[ $1 == "$2" ]] || fail "${3:-value}: expected '$2', got '$1'"
	pass "${3:-value} is '$2'"
}

# assert_match GOT REGEX [WHAT]
assert_match() {
	[[ $1 =~ $2 ]] || fail "${3:-value}: '$1' does not match /$2/"
	pass "${3:-value} matches /$2/"
}

# expect_err MESSAGE COMMAND...: the command fails and says MESSAGE.
expect_err() {
	local msg=$1 out
	shift
	if out=$("$@" 2>&1); then
		fail "'$*' succeeded; expected '$msg'"
	fi
	[[ $out == *"$msg"* ]] || fail "'$*': expected '$msg', got '$out'"
	pass "'$*' fails: $msg"
}

# on_exit COMMAND: run COMMAND (eval'd) first thing at exit.
on_exit() {
	EXIT_HOOKS+=("$1")
}

# ---- processes and mounts ---------------------------------------------------

# process_gone PID: exited, or a zombie waiting for whoever adopted it.  A
# zombie leader whose other threads still live (stuck in the kernel) is not
# gone: waiting for it would hang.
process_gone() {
	[[ -e /proc/$1 ]] || return 0
	local tasks=("/proc/$1/task/"*)
	((${#tasks[@]} <= 1)) && grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null
}

# process_running PID: exists and its leader is not a zombie (kill -0 says
# yes to a child that died and was not reaped yet).
process_running() {
	local state
	state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null) || return 1
	[[ -n $state && $state != Z ]]
}

# is_mounted DIR: from the mount table (mountpoint(1) would stat a dead mount).
is_mounted() {
	awk -v m="$1" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# abort_mount MOUNT [MOUNT_ID]: abort the FUSE connection behind MOUNT, so
# that no client and no thread of a dying daemon stays blocked on it.  With
# MOUNT_ID (field 1 of mountinfo) only that mount: unlike the device number
# it is not handed to the next mount at once, so a later daemon's mount on
# the same path is left alone.  The mount itself stays (stale) for the
# caller to detach or a next daemon to recover.
abort_mount() {
	local dev conn
	dev=$(awk -v m="$1" -v id="${2:-}" '$5 == m && (id == "" || $1 == id) { print $3 }' \
		/proc/self/mountinfo | tail -n 1)
	[[ -n $dev ]] || return 0
	conn=/sys/fs/fuse/connections/${dev#*:}
	[[ -d $conn ]] || mount -t fusectl fusectl /sys/fs/fuse/connections 2>/dev/null || true
	if [[ -w $conn/abort ]]; then
		echo 1 >"$conn/abort" 2>/dev/null || true
	else
		# umount -f runs fuse's umount_begin, which aborts the connection
		# even when the unmount itself fails.
		timeout 10 umount -f "$1" 2>/dev/null || true
	fi
}

# detach MOUNT: abort and lazily unmount whatever is mounted there.
_detach() {
	is_mounted "$1" || return 0
	abort_mount "$1"
	fusermount3 -uz "$1" 2>/dev/null || umount -l "$1" 2>/dev/null || true
}

# detach_mounts_under DIR: abort and detach every mount below DIR, deepest first.
detach_mounts_under() {
	local m
	while IFS= read -r m; do
		_detach "$m"
	done < <(awk -v d="$1/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
}

# ---- waiting -----------------------------------------------------------------

# A wait's SECONDS say how long the condition takes on a quiet machine; the
# deadline is WAIT_SCALE times that, and never under WAIT_FLOOR seconds, so
# that a busy 2-core machine or valgrind never fails a test that would pass.
# A wait that succeeds returns at once: only a failing test waits that long.
WAIT_SCALE=${VFHEALTH_WAIT_SCALE:-3}
WAIT_FLOOR=30
# _deadline SECONDS: the deadline of a wait of SECONDS, in microseconds.
_deadline() {
	local s=$(($1 * WAIT_SCALE))
	((s >= WAIT_FLOOR)) || s=$WAIT_FLOOR
	echo $((${EPOCHREALTIME//[.,]/} + s * 1000000))
}

# wait_until SECONDS COMMAND...: run COMMAND until it succeeds (0) or the
# deadline of SECONDS passes (1).  For conditions that no event announces;
# never a fixed sleep.
wait_until() {
	local deadline
	deadline=$(_deadline "$1")
	shift
	until "$@"; do
		((${EPOCHREALTIME//[.,]/} < deadline)) || return 1
		sleep 0.02
	done
}

# wait_for SECONDS DESCRIPTION COMMAND...: wait_until, failing the test with
# DESCRIPTION on timeout, or at once if the daemon dies meanwhile.
wait_for() {
	local deadline what=$2
	deadline=$(_deadline "$1")
	shift 2
	until "$@"; do
		if [[ -n $DAEMON_PID ]] && ! process_running "$DAEMON_PID"; then
			fail "vfhealthd died while waiting for: $what"
		fi
		((${EPOCHREALTIME//[.,]/} < deadline)) || fail "timed out waiting for: $what"
		sleep 0.02
	done
	pass "$what"
}

# ---- what the machine must allow ------------------------------------------------

# require_fuse: skip (77) where this machine cannot mount FUSE file systems
# the way vfhealthd does (allow_other: root, or user_allow_other).
require_fuse() {
	[[ -c /dev/fuse ]] || skip "no /dev/fuse"
	(exec 9<>/dev/fuse) 2>/dev/null || skip "/dev/fuse cannot be opened"
	grep -qw fuse /proc/filesystems || skip "kernel without FUSE"
	command -v fusermount3 >/dev/null || skip "no fusermount3"
	if [[ $(id -u) -ne 0 ]] && ! grep -qs '^[[:space:]]*user_allow_other' /etc/fuse.conf; then
		skip "mounting with allow_other needs root or user_allow_other"
	fi
}

# require_cmd COMMAND[:PACKAGE]...: skip unless each COMMAND is on the PATH;
# PACKAGE is the Debian package that has it, for the skip's message.
require_cmd() {
	local c
	for c; do
		command -v "${c%%:*}" >/dev/null && continue
		[[ $c != *:* ]] || skip "${c%%:*} is not installed (Debian: ${c#*:})"
		skip "$c is not installed"
	done
}

# mount_tmpfs DIR SIZE [MODE]: a private tmpfs at DIR, undone at exit; skip
# where this machine does not let us mount (no CAP_SYS_ADMIN).
mount_tmpfs() {
	mkdir -p -- "$1"
	mount -t tmpfs -o "size=$2,mode=${3:-0755}" vfhealth-test "$1" 2>/dev/null ||
		skip "cannot mount a tmpfs here (needs CAP_SYS_ADMIN)"
	EXTRA_MOUNTS+=("$1")
}

# ---- the daemon -------------------------------------------------------------

# start_daemon [OPTIONS...]: vfhealthd -f as a child on $MNT and $DB
# ($DAEMON_ARGS, then OPTIONS), returning once it has said READY=1 on
# $NOTIFY_SOCKET (an event, not a polled guess) and $MNT is mounted.  A stale
# mount left at $MNT by a killed instance is the daemon's to recover.
start_daemon() {
	: "${VFHEALTHD:?VFHEALTHD must name the vfhealthd binary (set by meson)}"
	: "${VFTOOL:?VFTOOL must name the vftool helper (set by meson)}"
	require_fuse
	if [[ -n $WATCHDOG_PID ]]; then
		kill "$WATCHDOG_PID" 2>/dev/null || true
		wait "$WATCHDOG_PID" 2>/dev/null || true
		WATCHDOG_PID=
	fi
	local sock=$T/notify.sock fifo=$T/notify.fifo line status listener dirs=()
	mapfile -t dirs < <(socket_dir_args)
	rm -f "$sock" "$fifo"
	mkfifo "$fifo"
	"$VFTOOL" notify-listen "$sock" 30000 ${DAEMON_NOTIFY_LOG:+"$DAEMON_NOTIFY_LOG"} >"$fifo" &
	listener=$!
	[[ -z ${DAEMON_NOTIFY_LOG:-} ]] || BG_PIDS+=("$listener")
	exec 8<"$fifo"
	read -r -t 60 -u 8 line || line=nothing
	[[ $line == bound ]] || fail "notify listener did not start ($line)"
	local t0=${EPOCHREALTIME//[.,]/}
	env "${DAEMON_ENV[@]}" NOTIFY_SOCKET="$sock" \
		"$VFHEALTHD" -f --db "$DB" "${dirs[@]}" "${DAEMON_ARGS[@]}" "$@" "$MNT" >>"$DAEMON_LOG" 2>&1 {TAP_FD}>&- &
	DAEMON_PID=$!
	DAEMON_MNT=$MNT
	read -r -t 120 -u 8 line || line=nothing
	DAEMON_STARTUP_US=$((${EPOCHREALTIME//[.,]/} - t0))
	DAEMON_STATUS=
	if [[ $line == ready* ]] && read -r -t 30 -u 8 status; then
		DAEMON_STATUS=${status#status }
	fi
	exec 8<&-
	[[ -n ${DAEMON_NOTIFY_LOG:-} ]] || wait "$listener" || true
	if [[ $line != "ready $DAEMON_PID" ]]; then
		process_running "$DAEMON_PID" || fail "vfhealthd exited before serving $MNT"
		fail "vfhealthd did not report READY=1 (got: $line)"
	fi
	is_mounted "$MNT" || fail "READY=1 before $MNT was mounted"
	[[ -z $DAEMON_WATCHDOG ]] || _start_watchdog
}

# The watchdog: if this daemon dies without unmounting, abort its connection
# so the test fails instead of hanging.  Device numbers and mount IDs are
# handed to the next mount at once, so it must never outlive its daemon into
# the next one's life: the next start_daemon ends it.
_start_watchdog() {
	local pid=$DAEMON_PID mnt=$MNT mount_id
	mount_id=$(awk -v m="$MNT" '$5 == m { print $1 }' /proc/self/mountinfo | tail -n 1)
	(
		while process_running "$pid"; do sleep 0.2; done
		abort_mount "$mnt" "$mount_id"
		umount -l "$mnt" 2>/dev/null || true
	) >/dev/null 2>&1 &
	WATCHDOG_PID=$!
}

# check_sanitizers [LOG]: fail on any sanitizer report in LOG (the daemon's
# log by default: every instance this test ran).  UBSan does not always
# stop the process it reports on, and a report is a failure either way.
check_sanitizers() {
	local log=${1:-$DAEMON_LOG}
	if grep -qE "$SANITIZER_RE" "$log" 2>/dev/null; then
		FAIL_LOG_LINES=60 fail "sanitizer report in $(basename "$log"): $(grep -m1 -E "$SANITIZER_RE" "$log")"
	fi
}

# _stop_daemon: SIGTERM, wait (STOP_DEADLINE s; then SIGKILL and abort), and
# reap.  Sets STOP_PROBLEM to what went wrong, empty when nothing did.
_stop_daemon() {
	STOP_PROBLEM=
	local pid=$DAEMON_PID rc=0
	[[ -n $pid ]] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	if ! wait_until "$STOP_DEADLINE" process_gone "$pid"; then
		STOP_PROBLEM="vfhealthd did not exit within ${STOP_DEADLINE}s of SIGTERM"
		kill -KILL "$pid" 2>/dev/null || true
		wait_until 5 process_gone "$pid" || abort_mount "$DAEMON_MNT"
	fi
	wait "$pid" 2>/dev/null || rc=$?
	DAEMON_PID=
	if [[ -z $STOP_PROBLEM ]] && ((rc != 0)); then
		STOP_PROBLEM="vfhealthd exited $rc on SIGTERM"
	fi
	if is_mounted "$DAEMON_MNT"; then
		[[ -n $STOP_PROBLEM ]] || STOP_PROBLEM="$DAEMON_MNT still mounted after SIGTERM"
		_detach "$DAEMON_MNT"
	fi
	if [[ -z $STOP_PROBLEM ]] && grep -qE "$SANITIZER_RE" "$DAEMON_LOG" 2>/dev/null; then
		STOP_PROBLEM="sanitizer report in $(basename "$DAEMON_LOG"): $(grep -m1 -E "$SANITIZER_RE" "$DAEMON_LOG")"
	fi
	[[ -z $STOP_PROBLEM ]]
}

# stop_daemon: SIGTERM; the daemon must exit 0 (LeakSanitizer makes a leak
# a non-zero exit), unmount, and leave no sanitizer report in its log.
stop_daemon() {
	_stop_daemon || FAIL_LOG_LINES=60 fail "$STOP_PROBLEM"
}

# kill_daemon: SIGKILL and reap; the mount is left stale, as after a crash.
# A daemon that does not die within KILL_DEADLINE seconds (a thread stuck on
# its own mount keeps the FUSE device open, so the kernel never aborts the
# connection and every client hangs) fails the test, after its threads are
# shown and the connection is aborted by hand -- unless KILL_STUCK_OK=1,
# which only counts it in killed_stuck (to look past a known bug).
kill_daemon() {
	[[ -n $DAEMON_PID ]] || return 0
	local pid=$DAEMON_PID t
	kill -KILL "$pid" 2>/dev/null || true
	if ! wait_until "$KILL_DEADLINE" process_gone "$pid"; then
		{
			echo "vfhealthd $pid still not dead ${KILL_DEADLINE} s after SIGKILL; its threads:"
			for t in /proc/"$pid"/task/*; do
				echo "  task ${t##*/} $(awk '/^State:/ { print $2, $3 }' "$t/status" 2>/dev/null)"
				sed 's/^/    /' "$t/stack" 2>/dev/null | head -n 8
			done
		} >"$T/stuck.txt"
		abort_mount "$DAEMON_MNT"
		wait "$pid" 2>/dev/null || true
		DAEMON_PID=
		killed_stuck=$((killed_stuck + 1))
		[[ ${KILL_STUCK_OK:-0} == 1 ]] && return 0
		fail "$(cat "$T/stuck.txt")"
	fi
	wait "$pid" 2>/dev/null || true
	DAEMON_PID=
}

# ---- small tools ---------------------------------------------------------------

# socket_dir_args: --socket-dir=DIR for each of SOCKET_DIRS, one per line
# (`mapfile -t a < <(socket_dir_args)`), for vfhealthd and vfhealth-sentinel.
socket_dir_args() {
	local d
	for d in "${SOCKET_DIRS[@]}"; do
		printf -- '--socket-dir=%s\n' "$d"
	done
}

# background COMMAND...: start COMMAND in the background; ended at exit.
# Its stdin is the caller's (`background cmd <fifo`): without job control,
# bash would give an asynchronous command /dev/null instead.
background() {
	"$@" <&0 {TAP_FD}>&- &
	BG_PIDS+=("$!")
}

# write_once FILE CONTENT: CONTENT in a single write(2) at offset 0, as the
# file interface takes a command (bash's printf writes line by line); its status is
# the write's and the close's (a refused claim is refused at its close).
write_once() {
	local tmp rc=0
	tmp=$(mktemp "$T/write.XXXXXX")
	printf '%s' "$2" >"$tmp"
	cat -- "$tmp" >"$1" || rc=$?
	rm -f -- "$tmp"
	return "$rc"
}

# ---- exit ---------------------------------------------------------------------

# At exit, whatever the reason: hooks, background processes, the daemon (a
# test that passed with its daemon still running stops it as stop_daemon
# does, checks included), the watchdog, every mount under T, then T itself.
_harness_exit() {
	local status=$? pid hook i record
	set +e
	_tap_record
	if ((status != 0 && status != 77)) && [[ $REPLY != *x* ]]; then
		# died without a failed assertion: set -e, a signal, a bare exit
		_tap_result x "the test died: exit status $status${HARNESS_ERR:+ after: $HARNESS_ERR}"
	fi
	for hook in "${EXIT_HOOKS[@]}"; do eval "$hook"; done
	for pid in "${BG_PIDS[@]}"; do kill "$pid" 2>/dev/null; done
	# A process that ignores SIGTERM must not hang the test: SIGKILL after 5 s.
	for pid in "${BG_PIDS[@]}"; do
		if ! wait_until 5 process_gone "$pid"; then
			echo "pid $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-80)) ignored SIGTERM" >&2
			kill -KILL "$pid" 2>/dev/null
		fi
		wait "$pid" 2>/dev/null
	done
	if [[ -n $DAEMON_PID ]]; then
		if ((status == 0)); then
			if ! _stop_daemon; then
				not_ok "vfhealthd stopped at the end: $STOP_PROBLEM"
				FAIL_LOG_LINES=60 _show_logs
				status=1
			else
				pass "vfhealthd stopped at the end: exit 0, unmounted, no sanitizer report"
			fi
		else
			STOP_DEADLINE=10 _stop_daemon
		fi
	fi
	if [[ -n $WATCHDOG_PID ]]; then
		kill "$WATCHDOG_PID" 2>/dev/null
		wait "$WATCHDOG_PID" 2>/dev/null
	fi
	[[ -z $DAEMON_MNT ]] || _detach "$DAEMON_MNT"
	for ((i = ${#EXTRA_MOUNTS[@]} - 1; i >= 0; i--)); do
		umount -l "${EXTRA_MOUNTS[i]}" 2>/dev/null
	done
	# Never descend into a mount left behind: a hung one would hang rm.
	detach_mounts_under "$T"
	_tap_record
	record=$REPLY
	if ((status == 77)); then
		if ((${#record} == 0)); then
			printf '1..0 # SKIP %s\n' "${HARNESS_SKIP:-}" >&"$TAP_FD"
		else
			printf 'ok - # SKIP %s\n1..%d\n' "${HARNESS_SKIP:-}" $((${#record} + 1)) >&"$TAP_FD"
		fi
		status=0
	else
		if ((status == 0)) && [[ $record == *x* ]]; then
			status=1 # a not_ok the test went on after
		fi
		if ((${#record} == 0)); then
			_tap_result o "${0##*/} ran to its end"
			record=o
		fi
		printf '1..%d\n' "${#record}" >&"$TAP_FD"
	fi
	if [[ -n ${VFHEALTH_KEEP:-} ]]; then
		echo "kept $T" >&2
	else
		rm -rf -- "$T"
	fi
	exit "$status"
}
trap _harness_exit EXIT
# The command that failed last in the script itself, for the "died" line.
trap 'HARNESS_ERR="line $LINENO: $BASH_COMMAND"' ERR
trap 'exit 143' TERM # through the EXIT trap: meson's timeout sends SIGTERM
trap 'exit 130' INT
