#!/usr/bin/env bash
# test-claim-whole.sh - a claim is what one open file was sent, whole, or
# nothing (fs/claims.h; vfhealth(5), assignments/):
#  1. bash's echo (one line per write(2), closed by dup2) and dash's make one
#     claim with every attribute; a bad line leaves no claim, its write
#     fails with EINVAL and so does every later write through that open file;
#  2. agent= without pid= or control= is refused at close (EINVAL, the rule
#     logged); a claim without agent= is accepted, logged once as unwatched;
#  6. a claimed_at the writer gives that is not later than an earlier
#     claim's of the VF is refused;
#  7. a hold, a quarantine or a switch to enforce between create and close
#     does not make the claim vanish; rmdir of a VF with a reservation is
#     EBUSY; a store unavailable between create and the last close keeps the
#     reservation and commits it once available again;
#  9. the assignment file of a claim among many VFs resolves by its inode.
source "$(dirname "$0")/lib.sh"
require_fuse
require_cmd dash sqlite3
mount_tmpfs "$T/db" 2m 0700
start_daemon

make_vfs V W
CTL=$T/vm-7.ctl # in the test's socket directory (SOCKET_DIRS)
live() { sqlite3 "$DB" "SELECT COUNT(*) FROM claims WHERE instance_id = '$1' AND released_at IS NULL"; }
rows() { sqlite3 "$DB" "SELECT COUNT(*) FROM claims WHERE instance_id = '$1'"; }
assert_claim() { # FILE AGENT CONTROL PID
	local got
	got=$(cat "$1") || fail "cat $1"
	assert_match "$got" $'\nagent='"$2"$'\ncontrol='"$3"$'\npid='"$4"$'\n' "$1"
}

# --- 1. bash: one line per write(2); the claim is made at the close
bash -c 'echo "agent=vsock:42
control=$1
pid=$2" > "$3"' bash "$CTL" $$ "$V/assignments/vm-7"
assert_claim "$V/assignments/vm-7" vsock:42:2222 "$CTL" $$
assert_eq "$(live vm-7)" 1 "rows of bash's multi-line claim"
unclaim "$V/assignments/vm-7"
# dash: its echo turns \n into newlines, one write(2)
dash -c 'echo "agent=vsock:43\ncontrol=$1\npid=$2" > "$3"' dash "$CTL" $$ "$V/assignments/vm-8"
assert_claim "$V/assignments/vm-8" vsock:43:2222 "$CTL" $$
unclaim "$V/assignments/vm-8"
# Lines through one descriptor: nothing is committed before the close.
exec 7>"$V/assignments/vm-9"
echo "agent=vsock:44" >&7
assert_match "$(cat "$V/assignments/vm-9")" $'\nagent=\n' "a reservation before its close"
echo "pid=$$" >&7
exec 7>&-
assert_claim "$V/assignments/vm-9" vsock:44:2222 "" $$
unclaim "$V/assignments/vm-9"

# A bad second line: the writer sees EINVAL, nothing is left.
out=$(bash -c 'echo "agent=vsock:45
colour=blue
pid=$1" > "$2"' bash $$ "$V/assignments/vm-b" 2>&1) && fail "bash: a bad line was accepted"
assert_match "$out" "$EINVAL" "bash's error"
assert_eq "$(ls "$V/assignments")" "" "after bash's bad second line"
out=$(dash -c 'echo "agent=vsock:45\ncolour=blue\npid=$1" > "$2"' dash $$ "$V/assignments/vm-b" 2>&1) &&
	fail "dash: a bad line was accepted"
assert_eq "$(ls "$V/assignments")" "" "after dash's bad second line"
# Through one descriptor: the bad line and every later one fail; no claim.
exec 7>"$V/assignments/vm-b"
echo "agent=vsock:45" >&7
if echo "colour=blue" >&7 2>/dev/null; then fail "a bad line was accepted"; fi
if echo "pid=$$" >&7 2>/dev/null; then fail "a line after a refused one was accepted"; fi
assert_eq "$(ls "$V/assignments")" "" "after a refused line (the reservation is cancelled)"
exec 7>&-
assert_eq "$(ls "$V/assignments")" "" "after the close of a refused open"
out=$(dash -c 'exec 7>"$1"; echo "agent=vsock:45" >&7; echo "colour=blue" >&7; echo "pid=1" >&7; exec 7>&-' \
	dash "$V/assignments/vm-b" 2>&1) || true
assert_eq "$(grep -c 'error' <<<"$out")" 2 "dash's errors for the bad line and the next: '$out'"
assert_eq "$(ls "$V/assignments")" "" "after dash's refused lines"
assert_eq "$(rows vm-b)" 0 "rows of refused claims"
# An update through a fresh open is staged alike: a bad line changes nothing.
put "$V/assignments/vm-u" "agent=vsock:46"$'\npid='"$$"
bash -c 'echo "control=$1
colour=blue" >> "$2"' bash "$CTL" "$V/assignments/vm-u" 2>/dev/null && fail "a bad update line was accepted"
assert_claim "$V/assignments/vm-u" vsock:46:2222 "" $$
unclaim "$V/assignments/vm-u"

# --- 2. agent= alone is refused, at close (coreutils' echo reports it)
expect_err "$EINVAL" put "$V/assignments/vm-a" "agent=vsock:47"
assert_eq "$(ls "$V/assignments")" "" "after agent= alone"
grep -q "claim 0000:41:00.4/assignments/vm-a refused (uid 0, pid [0-9]*): a claim naming agent= names its VMM too" \
	"$DAEMON_LOG" || fail "the refusal of agent= alone is not logged with its rule"
# bash shows no close error: the reservation goes with the last close
bash -c 'echo "agent=vsock:47" > "$1"' bash "$V/assignments/vm-a"
wait_for 10 "agent= alone gone" sh -c '! ls "$1" 2>/dev/null' sh "$V/assignments/vm-a"
# Lines through one descriptor that a shell dup2s for each echo: each close
# of a duplicate flushes; agent= first is not whole yet, the last close
# decides.
exec 7>"$V/assignments/vm-d"
echo "agent=vsock:49" >&7
echo "pid=$$" >&7
exec 7>&-
assert_claim "$V/assignments/vm-d" vsock:49:2222 "" $$
unclaim "$V/assignments/vm-d"
# ... and a bad line after a line that made a claim by itself leaves none.
exec 7>"$V/assignments/vm-d"
echo "pid=$$" >&7
if echo "colour=blue" >&7 2>/dev/null; then fail "a bad line was accepted"; fi
exec 7>&-
assert_eq "$(ls "$V/assignments")" "" "after a bad line following a whole claim"
assert_eq "$(live vm-d)" 0 "live claims of vm-d"
# control= alone or pid= alone: accepted (a claim without agent= is unwatched)
put "$V/assignments/vm-n" "pid=$$"
assert_claim "$V/assignments/vm-n" "" "" $$
wait_for 10 "the unwatched notice" grep -q '^<5>.*0000:41:00.4: claim of instance vm-n is unwatched' "$DAEMON_LOG"
unclaim "$V/assignments/vm-n"
touch "$V/assignments/vm-n" # a bare claim: unwatched too
wait_for 10 "the bare claim committed" sh -c '[ "$(sqlite3 "$1" "SELECT COUNT(*) FROM claims WHERE instance_id = '"'vm-n'"' AND released_at IS NULL")" = 1 ]' sh "$DB"
assert_eq "$(grep -c 'claim of instance vm-n is unwatched' "$DAEMON_LOG")" 2 "one notice per claim"
rm "$V/assignments/vm-n"

# --- 6. a claimed_at the writer gives is later than every earlier claim's
put "$W/assignments/vm-c" "claimed_at=2026-11-29T06:00:00Z"
rm "$W/assignments/vm-c"
expect_err "$EINVAL" put "$W/assignments/vm-c" "claimed_at=2026-11-29T06:00:00.000Z" # the same
expect_err "$EINVAL" put "$W/assignments/vm-c" "claimed_at=2026-11-29T05:00:00Z"     # earlier
assert_eq "$(ls "$W/assignments")" "" "after a reused claimed_at"
put "$W/assignments/vm-c" "claimed_at=2026-11-29T06:00:00.000000001Z"
assert_match "$(cat "$W/assignments/vm-c")" "^claimed_at=2026-11-29T06:00:00.000000001Z" "a later one"
rm "$W/assignments/vm-c"

# --- 7. between create and close, rules do not undo a reservation
exec 7>"$V/assignments/vm-h"
expect_err "$EBUSY" rmdir "$V"
echo 1 >"$V/quarantined" # the operator's hold
exec 7>&-
wait_for 10 "the bare claim under a hold" sh -c '[ "$(sqlite3 "$1" "SELECT COUNT(*) FROM claims WHERE instance_id = '"'vm-h'"' AND released_at IS NULL")" = 1 ]' sh "$DB"
assert_eq "$(ls "$V/assignments")" vm-h "a bare claim made under a hold"
rm "$V/assignments/vm-h"
put "$V/quarantined" 0
# ... with lines staged: committed at the close
exec 7>"$V/assignments/vm-h"
echo "agent=vsock:48" >&7
echo "pid=$$" >&7
put "$MNT/threshold" 1
put "$V/report" "failed vm-0 2026-11-29T07:00:00Z x"
assert_cat "$V/state" quarantined
exec 7>&-
assert_claim "$V/assignments/vm-h" vsock:48:2222 "" $$
assert_eq "$(live vm-h)" 1 "a claim committed under a quarantine"
unclaim "$V/assignments/vm-h"
put "$V/quarantined" 0
# ... and a switch to enforce, with the VF out of service
put "$MNT/mode" observe
put "$V/quarantined" 1
exec 7>"$V/assignments/vm-e"
put "$MNT/mode" enforce
exec 7>&-
wait_for 10 "the bare claim across a switch to enforce" sh -c '[ "$(sqlite3 "$1" "SELECT COUNT(*) FROM claims WHERE instance_id = '"'vm-e'"' AND released_at IS NULL")" = 1 ]' sh "$DB"
rm "$V/assignments/vm-e"
put "$V/quarantined" 0

# ... and the store turning unavailable: the reservation stays, and is
# committed once the store is available again
exec 7>"$W/assignments/vm-7"
dd if=/dev/zero of="$T/db/fill" bs=64k 2>/dev/null || true
expect_err "$EIO" put "$W/report" "failed vm-9 2026-11-29T07:00:01Z x"
exec 7>&-
wait_for 10 "the kept reservation" grep -q 'claim by instance vm-7 kept reserved' "$DAEMON_LOG"
assert_match "$(cat "$W/assignments/vm-7")" '^claimed_at=' "a kept reservation reads"
assert_eq "$(ls "$W/assignments")" vm-7 "a kept reservation is listed"
expect_err "$EBUSY" touch "$W/assignments/vm-8" # it still excludes the VF
rm "$T/db/fill"
put "$MNT/status" repair
assert_eq "$(live vm-7)" 1 "the kept reservation, committed at the repair"
rm "$W/assignments/vm-7"

# --- 9. inodes carry the VF: stat and open of a claim among many VFs
for i in $(seq 16 31); do mkdir "$MNT/0000:41:$(printf '%02x' "$i").0"; done
X=$MNT/0000:41:1f.0
put "$X/assignments/vm-x" "pid=$$"
ino=$(stat -c %i "$X/assignments/vm-x")
(( (ino >> 60) == 2 && ((ino >> 36) & 0xffffff) != 0 )) || fail "claim inode $ino carries no VF id"
assert_claim "$X/assignments/vm-x" "" "" $$
unclaim "$X/assignments/vm-x"

stop_daemon
echo "ok"
