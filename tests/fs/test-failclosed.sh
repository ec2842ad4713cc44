#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fail closed: the database becomes unwritable under the running daemon (its
# directory is a small tmpfs that we fill).  Quarantine reads and claims fail
# with EIO, mutations fail with EIO, bad input still gets EINVAL; status,
# resources and metrics stay readable and say why; `echo repair > status`
# fails while the disk is full and brings the store back once it is not.
source "$(dirname "$0")/lib.sh"
require_fuse
mount_tmpfs "$T/db" 2m 0700
start_daemon

make_vfs V W
put "$V/report" "failed vm-1 2026-11-29T07:00:00Z first"
touch "$W/assignments/vm-2"
assert_cat "$MNT/status" ok

# Watchers of the top level learn when availability changes.
watching=false
if command -v inotifywait >/dev/null; then
	background inotifywait -m -e close_write --format '%f %e' "$MNT" >"$T/iw.out" 2>"$T/iw.err"
	wait_until 10 grep -q "Watches established" "$T/iw.err" || fail "inotifywait did not start"
	watching=true
fi
quarantined_events() { grep -c '^quarantined CLOSE_WRITE' "$T/iw.out" || true; }

# VF/quarantined is served from the page cache: read it, and hold
# a descriptor on it, before the store fails.
# pread_held FD: what a re-read at offset 0 of a held descriptor returns
pread_held() {
	python3 -c 'import os, sys
try:
    sys.stdout.write(os.pread(int(sys.argv[1]), 64, 0).decode())
except OSError as e:
    sys.stdout.write("errno %d" % e.errno)' "$1"
}
assert_cat "$W/quarantined" 0
exec 8<"$W/quarantined"
assert_eq "$(pread_held 8)" 0 "a held descriptor of W/quarantined"

# --- the disk fills up: the next commit fails and latches the store
dd if=/dev/zero of="$T/db/fill" bs=64k 2>/dev/null || true
expect_err "$EIO" put "$V/report" "failed vm-3 2026-11-29T07:00:01Z second"
assert_match "$(cat "$MNT/status")" "^unavailable: .*(full|space)" "status while full"
if $watching; then
	wait_until 10 grep -q '^status CLOSE_WRITE' "$T/iw.out" || fail "no inotify event on status"
	wait_until 10 grep -q '^quarantined CLOSE_WRITE' "$T/iw.out" || fail "no inotify event on quarantined"
	wait_until 10 grep -q '^resources CLOSE_WRITE' "$T/iw.out" || fail "no inotify event on resources"
	# The notifier invalidated the cached pages before it touched: the held
	# descriptor's re-read reaches the daemon and fails closed too.
	assert_eq "$(pread_held 8)" "errno 5" "a held descriptor of W/quarantined while unavailable (EIO)"
fi
exec 8<&-

# Placement-facing reads fail closed (after the store's one retry).
expect_err "$EIO" cat "$MNT/quarantined"
expect_err "$EIO" cat "$V/quarantined"
expect_err "$EIO" cat "$W/quarantined"
expect_err "$EIO" cat "$V/state"
expect_err "$EIO" cat "$V/since"
expect_err "$EIO" cat "$MNT/held_back"
# Claims and every mutation fail with EIO ...
expect_err "$EIO" touch "$V/assignments/vm-4"
expect_err "$EIO" put "$W/assignments/vm-2" "agent=vsock:3"$'\npid='"$$"
expect_err "$EIO" put "$MNT/threshold" 3
expect_err "$EIO" put "$MNT/max_quarantined" 1
expect_err "$EIO" put "$V/quarantined" 1
expect_err "$EIO" put "$V/quarantined" 0
expect_err "$EIO" mkdir "$MNT/0000:41:00.6"
expect_err "$EIO" rm "$W/assignments/vm-2"
# ... while bad input is still refused as such, before the store is asked.
expect_err "$EINVAL" put "$MNT/threshold" abc
expect_err "$EINVAL" put "$V/report" "failed"
expect_err "$EINVAL" put "$V/quarantined" 7
# Calls that would change nothing still succeed.
out=$("$VFTOOL" write-read "$V/report" "failed vm-1 2026-11-29T07:00:00Z first")
assert_eq "$out" "unchanged failures=1 threshold=2" "a duplicate report while unavailable"
out=$("$VFTOOL" write-read "$W/report" "ok vm-2 -")
assert_eq "$out" "cleared=0 rescinded=0" "a success with nothing to clear while unavailable"

# status, resources and metrics stay readable and say why.
resources=$(cat "$MNT/resources")
assert_match "$resources" $'^total_slots 2\nused_slots 1\nallocatable_slots 0\nquarantined_slots 0\nplacement_disabled_reason .*(full|space)' "resources while unavailable"
metrics=$(cat "$MNT/metrics")
assert_match "$metrics" $'\nvfhealth_store_unavailable 1\n' "metrics while unavailable"
# Names still resolve and tallies still read: they are not placement decisions.
assert_eq "$(ls "$MNT" | grep -c :)" 2 "VFs listed while unavailable"
assert_cat "$V/tally" 1
assert_eq "$(ls "$W/assignments")" vm-2 "claims listed while unavailable"
# Claims read from memory (the sentinel keeps polling them),
# as an unprivileged reader too, without a repair on its behalf.
assert_cat "$MNT/claims" "0000:41:00.5 vm-2"
assert_match "$(cat "$W/assignments/vm-2")" $'^claimed_at=20[0-9:.TZ-]+\nagent=\ncontrol=\npid=\n' "a claim read while unavailable"
assert_match "$(setpriv --reuid=65534 --regid=65534 --clear-groups cat "$W/assignments/vm-2")" \
	'claimed_at=' "a claim read by nobody while unavailable"

# --- repair fails while the disk is still full ...
expect_err "$EIO" put "$MNT/status" repair
assert_match "$(cat "$MNT/status")" "^unavailable: " "status after a failed repair"

# ... and works once there is room again.
rm "$T/db/fill"
before=0
$watching && before=$(quarantined_events)
put "$MNT/status" repair
assert_cat "$MNT/status" ok
if $watching; then
	# Nobody wrote quarantined: the daemon announces that it reads again.
	wait_until 10 sh -c '[ "$(grep -c "^quarantined CLOSE_WRITE" "$1")" -gt "$2" ]' sh "$T/iw.out" "$before" ||
		fail "no inotify event on quarantined after the repair"
fi
assert_cat "$MNT/quarantined" ""
assert_cat "$V/quarantined" 0
assert_match "$(cat "$MNT/resources")" $'^total_slots 2\nused_slots 1\nallocatable_slots 1\nquarantined_slots 0$' "resources after repair"
# The failed report was not recorded; a retry is.
assert_cat "$V/tally" 1
out=$("$VFTOOL" write-read "$V/report" "failed vm-3 2026-11-29T07:00:01Z second")
assert_eq "$out" "quarantined failures=2 threshold=2" "the report retried after repair"
assert_cat "$MNT/quarantined" 0000:41:00.4
stop_daemon

# Every acknowledged change survived; nothing from the failed period did.
start_daemon
assert_cat "$V/tally" 2
assert_cat "$MNT/quarantined" 0000:41:00.4
assert_eq "$(ls "$W/assignments")" vm-2 "claims after restart"
stop_daemon

# --- a database that cannot be read: served unavailable, never overwritten
mv "$DB" "$T/db/good.db"
rm -f "$DB-wal" "$DB-shm"
head -c 16384 /dev/urandom >"$T/garbage"
cp "$T/garbage" "$DB"
start_daemon
assert_match "$(cat "$MNT/status")" "^unavailable: " "status of an unreadable database"
assert_match "$(cat "$MNT/resources")" $'\nallocatable_slots 0\n.*\nplacement_disabled_reason ' "resources"
assert_eq "$(ls "$MNT" | tr '\n' ' ')" "allocatable auto_recover claims gpus held_back max_quarantined metrics mode quarantined resources status threshold " "ls"
expect_err "$EIO" cat "$MNT/quarantined"
expect_err "$EIO" cat "$MNT/held_back"
expect_err "$EIO" mkdir "$V"
expect_err "$EIO" put "$MNT/status" repair
cmp -s "$T/garbage" "$DB" || fail "the unreadable database was modified"
# The operator puts a good database back; repair opens it.
mv "$T/db/good.db" "$DB"
put "$MNT/status" repair
assert_cat "$MNT/status" ok
assert_cat "$MNT/quarantined" 0000:41:00.4
# The kernel keeps the root's listing (it changes by mkdir and rmdir): the
# load that brought the VFs back must have dropped it.
assert_eq "$(ls "$MNT" | grep -c :)" 2 "VFs listed once the repair loaded the store"
stop_daemon
echo "ok"
