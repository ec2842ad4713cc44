#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# SIGTERM stops the sentinel within one poll timeout, closing every
# connection in flight: with queries hung on guests that never answer and a
# 30 s poll timeout, vfhealthd (sentinel inside) and vfhealth-sentinel
# (standalone) each exit 0 in a fraction of it, and the hung connections at
# the VMM are closed.  A sentinel asleep between passes an hour apart stops
# at once too (the stop wakes the scheduler's wait).
source "$(dirname "$0")/lib.sh"
: "${VFHEALTH_SENTINEL:?}"

N=5
start_vmm hung --never-answer --connect-log "$T/connects"

open_connections() {
	# Connections test-vmm still holds: its fds that are sockets, minus the two listeners.
	local pid=$1 n
	n=$(find "/proc/$pid/fd" -lname 'socket:*' 2>/dev/null | wc -l)
	echo $((n - 2))
}
VMM_PID=${BG_PIDS[-1]}
connections_at_least() { (($(open_connections "$VMM_PID") >= $1)); }
no_connections() { (($(open_connections "$VMM_PID") == 0)); }

check_stop() {
	local what=$1 pid=$2 started rc=0 elapsed
	wait_for 20 "$N hung queries at the VMM ($what)" lines_at_least "$T/connects" "$N"
	wait_for 20 "$N open connections ($what)" connections_at_least "$N"
	started=$(date +%s%N)
	kill -TERM "$pid"
	wait "$pid" || rc=$?
	[[ $pid != "$DAEMON_PID" ]] || DAEMON_PID=
	elapsed=$((($(date +%s%N) - started) / 1000000))
	echo "$what: stopped in ${elapsed} ms with $N queries in flight (poll timeout 30 s)"
	((rc == 0)) || fail "$what exited $rc on SIGTERM"
	((elapsed < 10000)) || fail "$what took ${elapsed} ms to stop"
	pass "$what stopped (exit 0) within 10 s with $N queries in flight"
	wait_for 10 "the VMM sees every connection closed ($what)" no_connections
}

# Claims first, without a sentinel, so that the first poll sees all of them
# (a poll that started with fewer would hold the rest for 30 s).
start_daemon --no-sentinel
for i in $(seq 1 $N); do
	register_vf "0000:41:00.$i"
	claim "0000:41:00.$i" "vm-$i" "agent=hvsock:$T/hung.hv:2222" "control=$T/hung.ctl"
done
stop_daemon # exit status 0, unmounted, no sanitizer report

start_daemon --poll-interval 0.2 --poll-timeout 30 --no-reconcile
check_stop vfhealthd "$DAEMON_PID"
grep -q "sentinel: stopped" "$T/daemon.log" || fail "the sentinel did not log its stop"
! mountpoint -q "$MNT" || fail "still mounted after SIGTERM"

# The standalone sentinel against a mount served by a daemon without one.
: >"$T/connects"
start_daemon --no-sentinel
for i in $(seq 1 $N); do
	[[ -f $MNT/0000:41:00.$i/assignments/vm-$i ]] || fail "claims did not survive the restart"
done
"$VFHEALTH_SENTINEL" --socket-dir "$T" --poll-interval 0.2 --poll-timeout 30 --no-reconcile "$MNT" \
	>>"$T/sentinel.log" 2>&1 &
SENTINEL_PID=$!
BG_PIDS+=("$SENTINEL_PID")
check_stop vfhealth-sentinel "$SENTINEL_PID"
grep -q "sentinel: stopped" "$T/sentinel.log" || fail "vfhealth-sentinel did not log its stop"

# Asleep: the first reconcile done, the next pass an hour away.
"$VFHEALTH_SENTINEL" --socket-dir "$T" --reconcile-only --reconcile-interval 3600 \
	--metrics-file "$T/asleep.prom" "$MNT" >>"$T/sentinel.log" 2>&1 &
SENTINEL_PID=$!
BG_PIDS+=("$SENTINEL_PID")
reconciled() { grep -q '^vfhealth_sentinel_reconciles_total 1$' "$T/asleep.prom" 2>/dev/null; }
wait_for 20 "the first reconcile" reconciled
started=$(date +%s%N)
kill -TERM "$SENTINEL_PID"
rc=0
wait "$SENTINEL_PID" || rc=$?
elapsed=$((($(date +%s%N) - started) / 1000000))
echo "asleep: stopped in ${elapsed} ms (next pass in 3600 s)"
((rc == 0)) || fail "the sleeping sentinel exited $rc on SIGTERM"
((elapsed < 10000)) || fail "the sleeping sentinel took ${elapsed} ms to stop"
echo PASS
