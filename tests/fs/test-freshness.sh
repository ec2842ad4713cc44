#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Freshness under stress: no read may show the state from
# before a write that returned -- a stale `quarantined` is failing open.
# tests/lib/vffresh.c does the work (its design notes say how):
#  1. pairs: FRESHNESS_VFS VFs, each toggled by its own writer every round,
#     all concurrently; after every round, readers in other processes (fresh
#     opens, held descriptors re-read at offset 0, mmap) check VF/quarantined,
#     VF/state and the derived quarantined, allocatable and resources, and
#     inotify and poll watchers must see every change.  0 stale, 0 torn,
#     at least 20,000 change/read pairs.
#  2. hammer: FRESHNESS_READERS processes read the same inodes while a writer
#     changes them, with the fewest FUSE workers (1) and many (64), each for
#     FRESHNESS_HAMMER_S seconds; a hang is detected (vffresh exits 3), the
#     mount aborted and the test failed, instead of hanging.
# Knobs (environment): FRESHNESS_ROUNDS (600), FRESHNESS_VFS (6),
# FRESHNESS_READERS (16), FRESHNESS_HAMMER_S (15): raise them for longer runs.
source "$(dirname "$0")/lib.sh"
require_fuse
vffresh=${VFFRESH:?VFFRESH must name vffresh (set by meson)}
rounds=${FRESHNESS_ROUNDS:-600}
n_vfs=${FRESHNESS_VFS:-6}
readers=${FRESHNESS_READERS:-16}
hammer_s=${FRESHNESS_HAMMER_S:-15}
min_pairs=20000

# The database on a tmpfs: the figures are about the mount, not the disk.
mount_tmpfs "$T/db" 64m
DB=$T/db/vfhealth.db

vfs=()
for ((i = 0; i < n_vfs; i++)); do vfs+=("$(printf '0000:41:%02x.%d' $((i / 8)) $((i % 8)))"); done

# run_vffresh WHAT ARGS...: vffresh, its figures in $T/WHAT.out; a hang
# aborts the mount (the daemon may be wedged) and fails.
run_vffresh() {
	local what=$1 rc=0
	shift
	"$vffresh" "$@" >"$T/$what.out" 2>"$T/$what.err" || rc=$?
	if ((rc == 3)); then
		abort_mount "$MNT"
		FAIL_LOG_LINES=60 fail "$what: HANG: $(cat "$T/$what.err")"
	fi
	((rc == 0)) || fail "$what: $(cat "$T/$what.out") $(head -c 2000 "$T/$what.err")"
	echo "$what: $(cat "$T/$what.out")"
}

# -- 1. change/read pairs ------------------------------------------------------------
start_daemon --fuse-workers 4 --threshold 1
for v in "${vfs[@]}"; do mkdir "$MNT/$v"; done
run_vffresh pairs pairs "$MNT" "$rounds" "${vfs[@]}"
read -r _ pairs _ stale _ torn _ <"$T/pairs.out"
((stale == 0 && torn == 0)) || fail "stale $stale, torn $torn"
((pairs >= min_pairs || rounds < 600)) || fail "only $pairs change/read pairs (want >= $min_pairs)"
check_sanitizers
stop_daemon

# -- 2. many readers of the same inodes, the fewest and many workers ------------------
for workers in 1 64; do
	start_daemon --fuse-workers "$workers"
	mkdir -p "$MNT/${vfs[0]}" # registered by part 1
	run_vffresh "hammer-$workers" hammer "$MNT" "$hammer_s" "$readers" "${vfs[0]}"
	stop_daemon
done

# -- 3. a descriptor held across the VF's unregistration --------------------------
# Its inode is no longer reachable by name, so the daemon drops its pages by
# number: a re-read at offset 0 fails (the VF is gone) instead of showing
# the old VF's last state next to the new VF's.
start_daemon
v=${vfs[0]}
put "$MNT/$v/quarantined" 0 # part 1 may have left it quarantined
pread0() { python3 -c 'import os, sys; sys.stdout.write(os.pread(7, 64, 0).decode())' 7<&"$1"; }
exec 7<"$MNT/$v/quarantined"
assert_eq "$(pread0 7)" 0 "held quarantined before the unregistration"
rmdir "$MNT/$v"
mkdir "$MNT/$v"
echo 1 >"$MNT/$v/quarantined"
assert_cat "$MNT/$v/quarantined" 1
if out=$(pread0 7 2>&1); then
	fail "a descriptor on the unregistered VF's quarantined still reads '$out'"
fi
[[ $out == *"No such file or directory"* ]] || fail "held descriptor: unexpected error: $out"
exec 7<&-
stop_daemon
