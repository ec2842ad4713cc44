#!/usr/bin/env bash
# hostile-writes.sh - hostile-writes (see its header) against a real
# vfhealthd mount; the daemon must still be serving at the end.
set -euo pipefail
# shellcheck source=../crash/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../crash/lib.sh"
bin=${HOSTILE_WRITES:?HOSTILE_WRITES must name hostile-writes (set by meson)}
require_fuse

iterations=${HOSTILE_ITERATIONS:-2000}
seed=${HOSTILE_SEED:-$(date +%s)}
echo "hostile-writes: $iterations random inputs, seed $seed (HOSTILE_SEED=$seed reproduces them)"
mnt=$MNT
# The database on a tmpfs where we can (each accepted write is an fsync).
dbdir=$T/db
if mkdir -p "$dbdir" && mount -t tmpfs -o size=64m,mode=0700 tmpfs "$dbdir" 2>/dev/null; then
	EXTRA_MOUNTS+=("$dbdir")
fi
DB=$dbdir/vfhealth.db
# Claims' socket paths must lie in $T/sock (docs/security.md); the program plants a
# symlink there and expects EACCES for every path outside or through it.
mkdir "$T/sock"
SOCKET_DIRS=("$T/sock")
start_daemon --threshold 1000 --no-sentinel
"$bin" "$mnt" "$iterations" "$seed" "$T/sock" || fail "hostile-writes found a violation (seed $seed)"
kill -0 "$DAEMON_PID" 2>/dev/null || fail "vfhealthd died"
[[ $(vf_read "$mnt/status") == ok ]] || fail "status: $(vf_read "$mnt/status")"
# Each refusal named its writer.
grep -q "refused (outside the socket directories or through a symlink) for uid 0 pid [0-9]" \
	"$DAEMON_LOG" || fail "no refusal naming its writer in the log"
stop_daemon
