#!/usr/bin/env bash
# repair-rights.sh - a reader who may not write never makes the daemon
# repair its store (docs/security.md).  The database's disk fills up and
# the store latches unavailable; an unprivileged user then reads every file
# she can read under the mount, and the daemon's count of repair attempts
# (vfhealth_store_repairs_total) stays 0.  Root's read of one of them is
# the control: it does attempt a repair (and counts).
set -euo pipefail
# shellcheck source=../crash/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../crash/lib.sh"
require_fuse
require_cmd setpriv:util-linux
mount_tmpfs "$T/db" 2m 0700
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
repairs() {
	nobody "$VFIO" read "$MNT/metrics" | awk '$1 == "vfhealth_store_repairs_total" { print $2 }'
}

start_daemon --no-sentinel --threshold 2
V=$MNT/0000:41:00.4 W=$MNT/0000:41:00.5
for d in "$V" "$W"; do [[ $(vfio mkdir "$d") == ok ]] || fail "mkdir $d"; done
[[ $(vfio report "$V/report" "failed vm-1 - first") == "ok recorded"* ]] || fail "report"
[[ $(vfio create "$W/assignments/vm-2") == ok ]] || fail "claim"

# The outage: the disk fills, the next commit fails and latches the store.
dd if=/dev/zero of="$T/db/fill" bs=64k 2>/dev/null || true
[[ $(vfio write "$V/quarantined" 1) == EIO ]] || fail "the write on a full disk did not fail"
[[ $(nobody "$VFIO" read "$MNT/status") == $'ok\nunavailable: '* ]] || fail "status: not unavailable"
[[ $(repairs) == 0 ]] || fail "repairs before the reads: $(repairs)"

# Every file she can read, every one of them read (placement reads fail).
mapfile -t files < <(nobody find "$MNT" -type f -readable 2>/dev/null)
((${#files[@]} >= 20)) || fail "only ${#files[@]} readable files found: ${files[*]}"
for f in "${files[@]}"; do
	out=$(nobody "$VFIO" read "$f")
	[[ $out == ok* || $out == EIO ]] || fail "reading $f as a user: $out"
done
[[ $(repairs) == 0 ]] || fail "a user's reads made $(repairs) repair attempt(s)"
echo "${#files[@]} files read by a user during the outage: 0 repair attempts"

# The control: root's read may repair (and fails: the disk is still full).
[[ $(vfio read "$V/state") == EIO ]] || fail "root's read of state while the disk is full"
[[ $(repairs) == 1 ]] || fail "root's read made $(repairs) repair attempts, not 1"
rm "$T/db/fill"
stop_daemon
