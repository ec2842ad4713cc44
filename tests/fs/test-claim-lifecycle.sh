#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The claim lifecycle, on the real mount:
#  rule 3  a claim exists only once what an open file was sent is committed
#          at its close: create reserves (EBUSY/EEXIST at once), a refused
#          write leaves nothing (no
#          claim, no history row, no notification), a restart forgets a
#          reservation;
#  rule 2  release=CLAIMED_AT releases that claim and nothing newer (ESTALE
#          for a claimed_at never claimed); again, it is done already;
#  rule 1  the assignment file shows the boot id the daemon recorded;
#  rule 7  assignment files and assignments/ read from memory while the store
#          is unavailable, while placement reads fail closed (EIO).
source "$(dirname "$0")/lib.sh"
require_fuse
require_cmd inotifywait:inotify-tools sqlite3
mount_tmpfs "$T/db" 2m 0700
start_daemon

ESTALE="Stale file handle"
make_vfs V W
boot=$(</proc/sys/kernel/random/boot_id)
claimed_at() { sed -n 's/^claimed_at=//p' "$1"; }

# The registrations' notifications are the notifier's to send, later: let
# them drain before watching.  The marker: a failure report on W changes
# only W's files, and W/tally is written by the notifier's toucher alone,
# after every file of every change queued before it (the notifier drains in
# order; top-level files first, then each VF's in the order queued).  (Not
# a file we write ourselves: the kernel merges two identical CLOSE_WRITE
# events in a row that the watcher has not read, so ours and the toucher's
# may show as one.)
marker_seen() { grep -q "^$W/tally CLOSE_WRITE" "$1"; }
background inotifywait -m -e close_write --format '%w%f %e' "$MNT" "$W" >"$T/iw0.out" 2>"$T/iw0.err"
wait_until 10 grep -q "Watches established" "$T/iw0.err" || fail "inotifywait did not start"
put "$W/report" "failed marker-1 - a marker"
wait_for 10 "the registrations' notifications" marker_seen "$T/iw0.out"

# --- rule 3: a refused first write leaves nothing behind
# Watch the top level (resources follows claims) and the VF directory.
background inotifywait -m -e modify -e close_write -e create -e delete --format '%w%f %e' \
	"$MNT" "$V" "$W" >"$T/iw.out" 2>"$T/iw.err"
wait_until 10 grep -q "Watches established" "$T/iw.err" || fail "inotifywait did not start"
expect_err "$EINVAL" put "$V/assignments/i-300" "colour=blue"
expect_err "$EINVAL" put "$V/assignments/i-300" "agent=vsock:3"$'\n'"pid=0"
assert_eq "$(ls "$V/assignments")" "" "claims after refused first writes"
expect_err "$ENOENT" cat "$V/assignments/i-300"
assert_cat "$MNT/resources" $'total_slots 2\nused_slots 0\nallocatable_slots 2\nquarantined_slots 0'
# The marker again (a success clears W's failure: W's files only); once
# the toucher's event for it is in, any event for the claim would be too.
put "$W/report" "ok marker-1 -"
wait_for 10 "the notifier's event on W/tally" marker_seen "$T/iw.out"
others=$(grep -v "^$W/" "$T/iw.out" || true)
assert_eq "$others" "" "notifications after a refused first write"
# The VF is free: a valid create and write claims it at once, as it says.
put "$V/assignments/i-300" "agent=vsock:3"$'\npid='"$$"
assert_eq "$(ls "$V/assignments")" i-300 "a claim after a valid first write"
assert_match "$(cat "$V/assignments/i-300")" $'\nagent=vsock:3:2222\n' "its first write"
unclaim "$V/assignments/i-300"

# --- rule 3: create answers at once; a reservation is held, counted, and
# visible by name (lookup, readdir, open), but not durable until committed
rows() { sqlite3 "$DB" "SELECT COUNT(*) FROM claims WHERE instance_id = '$1'"; }
touch "$W/assignments/vm-1"
expect_err "$EBUSY" touch "$W/assignments/vm-2"
expect_err "$EBUSY" put "$W/assignments/vm-2" "agent=vsock:3"$'\npid='"$$"
exec 7>"$V/assignments/vm-a" # created, not written: a reservation
expect_err "$EBUSY" touch "$V/assignments/vm-b"
expect_err "$EEXIST" sh -c 'set -C; : >"$1"' sh "$V/assignments/vm-a" # O_EXCL
assert_eq "$(ls "$V/assignments")" vm-a "a reservation is listed"
stamp=$(claimed_at "$V/assignments/vm-a")
assert_match "$(cat "$V/assignments/vm-a")" "^claimed_at=$stamp"$'
agent=
control=
pid=
pid_starttime=
boot_id='"$boot"'$' 	"a reservation reads as the claim it will be"
touch "$V/assignments/vm-a" # another process opens it by name: still a reservation
assert_eq "$(rows vm-a)" 0 "rows of a reservation"
# Placement counts it as taken (fail closed).
assert_cat "$MNT/resources" $'total_slots 2\nused_slots 2\nallocatable_slots 0\nquarantined_slots 0'
expect_err "$EBUSY" rmdir "$V"
# A refused write through another handle leaves it be.
expect_err "$EINVAL" put "$V/assignments/vm-a" "colour=blue"
assert_eq "$(ls "$V/assignments")" vm-a "a reservation after another handle's refused write"
# What another open writes commits it at that open's close, with the stamp.
put "$V/assignments/vm-a" "agent=vsock:9"$'\npid='"$$"
assert_eq "$(rows vm-a)" 1 "rows once committed by another handle's write"
assert_match "$(cat "$V/assignments/vm-a")" "^claimed_at=$stamp"$'\nagent=vsock:9:2222\n' "what the first write said"
echo "pid=$$" >&7 # the creator's write updates the claim at its close
exec 7>&-
assert_match "$(cat "$V/assignments/vm-a")" $'\nagent=vsock:9:2222\n.*\npid='"$$"$'\n' "the creator's write"
unclaim "$V/assignments/vm-a"
# A refused first write through the creating handle cancels it: nothing is
# left, not even once the handle is released.
exec 7>"$V/assignments/vm-x"
if echo "colour=blue" >&7 2>/dev/null; then fail "a bad first write was accepted"; fi
assert_eq "$(ls "$V/assignments")" "" "after a refused first write through the creator"
exec 7>&-
touch "$V/assignments/vm-y" # the VF is free again
assert_eq "$(ls "$V/assignments")" vm-y "the VF after a cancelled reservation"
rm "$V/assignments/vm-y"
# rm cancels a reservation; its creator's handle then holds nothing.
exec 7>"$V/assignments/vm-r"
rm "$V/assignments/vm-r"
assert_eq "$(ls "$V/assignments")" "" "after rm of a reservation"
if echo "agent=vsock:3" >&7 2>/dev/null; then fail "a write to a cancelled reservation"; fi
exec 7>&-
# Released without a write: a bare claim (the release follows close(2)), and
# the name resolves at once meanwhile: create, close, open again and write,
# racing the creator's release (a commit is idempotent; the write applies).
for i in $(seq 1 20); do
	: >"$V/assignments/vm-l"
	put "$V/assignments/vm-l" "agent=vsock:$((i + 2))"$'\npid='"$$"
	assert_match "$(cat "$V/assignments/vm-l")" $'\nagent=vsock:'"$((i + 2))"$':2222\n' "write after create+close ($i)"
	unclaim "$V/assignments/vm-l"
done
assert_eq "$(sqlite3 "$DB" "SELECT COUNT(*) FROM claims WHERE instance_id = 'vm-l' AND agent LIKE 'vsock:%'")" 20 \
	"each create+close+write is one claim with what was written"
exec 7>"$V/assignments/vm-c"
exec 7>&-
assert_eq "$(ls "$V/assignments")" vm-c "the name after close"
wait_for 10 "a bare claim after close" sh -c '[ "$(sqlite3 "$1" "SELECT COUNT(*) FROM claims WHERE instance_id = '"'vm-c'"' AND released_at IS NULL")" = 1 ]' sh "$DB"
rm "$V/assignments/vm-c"

# --- rule 1: the assignment file shows the boot id of claim time
assert_match "$(cat "$W/assignments/vm-1")" $'\nboot_id='"$boot"'$' "boot_id"

# --- rule 2: release=CLAIMED_AT releases that claim and nothing newer
old=$(claimed_at "$W/assignments/vm-1")
exec 6<>"$W/assignments/vm-1" # opened on the old claim, as reconcile would
rm "$W/assignments/vm-1"
touch "$W/assignments/vm-1" # released and claimed again meanwhile
new=$(claimed_at "$W/assignments/vm-1")
[[ $new != "$old" ]] || fail "the new claim has the old claimed_at"
# the old one is on record as released: done again, the newer one stays
put "$W/assignments/vm-1" "release=$old"
printf 'release=%s' "$old" >&6 || fail "a release through a handle on the old claim failed"
assert_eq "$(cat <&6)" "already released $old ended=released newer=$new" "the outcome through the old handle"
exec 6>&-
assert_eq "$(claimed_at "$W/assignments/vm-1")" "$new" "the newer claim stays"
# a claimed_at never claimed, while another claim lives: ESTALE
expect_err "$ESTALE" put "$W/assignments/vm-1" "release=2026-11-29T05:00:00Z"
expect_err "$EINVAL" put "$W/assignments/vm-1" "release=$new"$'\n'"agent=vsock:3"
expect_err "$EINVAL" put "$W/assignments/vm-1" "release=yesterday"
# Another spelling of the same instant releases it.  A release by write
# changes the listing without a directory operation: listed just before, it
# must not be listed from the kernel's cache just after.
assert_eq "$(ls "$W/assignments")" vm-1 "the claim before its release"
put "$W/assignments/vm-1" "release=${new,,}"
assert_eq "$(ls "$W/assignments")" "" "released by its claimed_at"
# Released already (the shell's O_CREAT reserved the VF again): done, and
# nothing is left; a claimed_at never claimed: ENOENT.
put "$W/assignments/vm-1" "release=$new"
expect_err "$ENOENT" put "$W/assignments/vm-1" "release=2026-11-29T05:00:00Z"
assert_eq "$(ls "$W/assignments")" "" "after releases of no live claim"

# --- rule 7: assignment files read from memory while the store is unavailable
touch "$W/assignments/vm-7"
dd if=/dev/zero of="$T/db/fill" bs=64k 2>/dev/null || true
expect_err "$EIO" put "$V/report" "failed vm-9 2026-11-29T07:00:01Z x"
assert_match "$(cat "$MNT/status")" "^unavailable: " "status while full"
assert_match "$(cat "$W/assignments/vm-7")" "boot_id=$boot" "an assignment file while unavailable"
assert_match "$(setpriv --reuid=65534 --regid=65534 --clear-groups cat "$W/assignments/vm-7")" \
	'^claimed_at=' "an assignment file read by nobody while unavailable"
assert_eq "$(ls "$W/assignments")" vm-7 "assignments/ while unavailable"
expect_err "$EIO" cat "$V/quarantined"
expect_err "$EIO" cat "$MNT/quarantined"
expect_err "$EIO" touch "$V/assignments/vm-8" # no reservation that could not commit
rm "$T/db/fill"
put "$MNT/status" repair
assert_cat "$MNT/status" ok

# --- rule 3: a reservation held when the daemon dies is not persisted
exec 7>"$V/assignments/vm-held"
kill_daemon
{ exec 7>&-; } 2>/dev/null || true
count() { sqlite3 "$DB" "SELECT COUNT(*) FROM claims WHERE instance_id = '$1'"; }
assert_eq "$(count i-300)" 1 "rows of i-300 (only the valid claim)"
assert_eq "$(count vm-held)" 0 "rows of a reservation held at stop"
assert_eq "$(count vm-8)" 0 "rows of a create refused while unavailable"
assert_eq "$(sqlite3 "$DB" "SELECT COUNT(*) FROM claims WHERE released_at IS NULL")" 1 "live claims"
assert_eq "$(sqlite3 "$DB" "SELECT boot_id FROM claims WHERE instance_id = 'vm-7'")" "$boot" "boot_id stored"
start_daemon
assert_eq "$(ls "$V/assignments")" "" "no reservation after a restart"
touch "$V/assignments/vm-held"
stop_daemon
echo "ok"
