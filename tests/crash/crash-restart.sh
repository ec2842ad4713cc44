#!/usr/bin/env bash
# crash-restart.sh - ROUNDS rounds (default 100) of: a writer process
# hammering failure reports and claims through the mount, SIGKILL of
# vfhealthd at a random moment, restart on the stale mount.  After every
# round: every write that returned success is present, nothing that was
# never written appeared, the fixed state no writer touches is unchanged,
# and a copy of the database passes PRAGMA integrity_check (a copy, so the
# daemon's own WAL recovery is what the next round exercises).
#
# The random delay before the SIGKILL is the fault schedule; everything the
# test waits for is an event (READY=1, waitpid) or a deadline.
set -euo pipefail
# shellcheck source=tests/crash/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
writer=${CRASH_WRITER:?CRASH_WRITER must name crash-writer (set by meson)}

rounds=${CRASH_ROUNDS:-100}
max_kill_ms=${CRASH_MAX_KILL_MS:-100}
seed=${CRASH_SEED:-$(date +%s)}
echo "crash-restart: $rounds rounds, seed $seed (CRASH_SEED=$seed reproduces the schedule)"
RANDOM=$seed

require_fuse
require_cmd sqlite3

mnt=$MNT
# The database on a tmpfs: a SIGKILL loses the process, not the page cache,
# so this proves the same thing as a disk, without a disk's fsync latency
# (tens of ms on shared CI disks) deciding how many writes a round holds.
dbdir=$T/db
if ! mkdir -p "$dbdir" || ! mount -t tmpfs -o size=64m,mode=0700 tmpfs "$dbdir" 2>/dev/null; then
	if [[ -d /dev/shm && -w /dev/shm ]]; then
		dbdir=$(mktemp -d /dev/shm/vfhealth-proof.XXXXXX)
		on_exit "rm -rf -- '$dbdir'"
	fi
else
	EXTRA_MOUNTS+=("$dbdir")
fi
DB=$dbdir/vfhealth.db
db=$DB
log=$T/writes.log
vfs=(0000:41:00.1 0000:41:00.2 0000:41:00.3 0000:41:00.4
     0000:41:00.5 0000:41:00.6 0000:41:00.7 0000:42:00.0)
fixed=0000:43:00.0 # manual quarantine plus one failure; no writer touches it

# Reports stay below the threshold, so every unique one is "recorded".
start_daemon --threshold 1000
for vf in "${vfs[@]}" "$fixed"; do
	[[ $(vfio mkdir "$mnt/$vf") == ok ]] || fail "mkdir $vf"
done
[[ $(vfio report "$mnt/$fixed/report" "failed keep-1 - fixed state") == "ok recorded"* ]] ||
	fail "fixed failure report"
[[ $(vfio write "$mnt/$fixed/quarantined" 1) == ok ]] || fail "manual quarantine"

fixed_state() { "$writer" snapshot "$mnt" "$fixed" || echo "snapshot failed"; }
before=$(fixed_state)

integrity_check() {
	local copy=$T/copy
	rm -rf -- "$copy" && mkdir -p "$copy"
	cp -- "$db"* "$copy/"
	local res
	res=$(sqlite3 "$copy/vfhealth.db" 'PRAGMA integrity_check;' 2>&1) || true
	[[ $res == ok ]] || fail "round $1: integrity_check: $res"
}

start_ns=$(date +%s%N)
total_acks=0
for ((round = 1; round <= rounds; round++)); do
	"$writer" run "$mnt" "$log" "$((seed + round))" "$round" "${vfs[@]}" \
		>"$T/acks" 2>"$T/writer.err" &
	writer_pid=$!
	# The fault schedule: a random moment within the writer's run.
	delay_ms=$((RANDOM % max_kill_ms))
	sleep "$((delay_ms / 1000)).$(printf %03d $((delay_ms % 1000)))"
	t0=$(date +%s%N)
	kill_daemon
	t1=$(date +%s%N)
	wait "$writer_pid" || fail "round $round: writer: $(cat "$T/writer.err")"
	total_acks=$((total_acks + $(cat "$T/acks")))
	t2=$(date +%s%N)
	integrity_check "$round"
	t3=$(date +%s%N)
	start_daemon --threshold 1000
	t4=$(date +%s%N)
	[[ -n ${CRASH_TRACE:-} ]] && echo "round $round: kill after $delay_ms ms, $(cat "$T/acks") acks; kill $(((t1 - t0) / 1000000)) writer $(((t2 - t1) / 1000000)) integrity $(((t3 - t2) / 1000000)) restart $(((t4 - t3) / 1000000)) ms"
	"$writer" check "$mnt" "$log" "${vfs[@]}" >"$T/check" 2>&1 ||
		fail "round $round (kill after ${delay_ms} ms): $(cat "$T/check")"
	[[ $(fixed_state) == "$before" ]] || fail "round $round: state no writer touched changed"
done
elapsed_ms=$((($(date +%s%N) - start_ns) / 1000000))

stop_daemon
integrity_check final
# A test that killed before any write landed would prove nothing.
((total_acks >= rounds)) || fail "only $total_acks acknowledged writes in $rounds rounds"
echo "crash-restart: $rounds rounds in ${elapsed_ms} ms, $total_acks acknowledged writes; $(cat "$T/check")"
((killed_stuck == 0)) || echo "crash-restart: KILL_STUCK_OK=1: vfhealthd hung after SIGKILL in $killed_stuck rounds (connection aborted by hand)"
