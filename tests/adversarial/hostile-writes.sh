#!/usr/bin/env bash
# hostile-writes.sh - hostile-writes (see its header) against a real
# vfhealthd mount; the daemon must still be serving at the end.
set -euo pipefail
# shellcheck source=tests/crash/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../crash/lib.sh"
bin=$build_root/tests/adversarial/hostile-writes
need_fuse
[[ -x $bin ]] || fail "$bin was not built"

iterations=${HOSTILE_ITERATIONS:-2000}
seed=${HOSTILE_SEED:-$(date +%s)}
echo "hostile-writes: $iterations random inputs, seed $seed (HOSTILE_SEED=$seed reproduces them)"
mnt=$t_tmp/mnt
# The database on a tmpfs where we can (each accepted write is an fsync).
dbdir=$t_tmp/db
if mkdir -p "$dbdir" && mount -t tmpfs -o size=64m tmpfs "$dbdir" 2>/dev/null; then
	t_mounts+=("$dbdir")
fi
start_daemon "$mnt" "$dbdir/vfhealth.db" --threshold 1000 --no-sentinel
"$bin" "$mnt" "$iterations" "$seed" || fail "hostile-writes found a violation (seed $seed)"
kill -0 "$daemon_pid" 2>/dev/null || fail "vfhealthd died"
[[ $(vf_read "$mnt/status") == ok ]] || fail "status: $(vf_read "$mnt/status")"
finish
