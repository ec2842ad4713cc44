#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A VF directory of vfhealth(5): mkdir/rmdir, tally, quarantined, failures,
# report (with its read-back outcome), and reads longer than st_size.
source "$(dirname "$0")/lib.sh"
require_fuse
start_daemon

V=$MNT/0000:41:00.4
W=$MNT/0000:41:00.5
T0=2026-11-29T07:00:00Z
T1=2026-11-29T07:00:01.5Z

# --- mkdir registers, with the address syntax sysfs uses
for bad in 0000:41:00.8 0000:41:0.4 0000:41:00.4x 0000:4g:00.4 0000:4A:00.4 41:00.4 \
	00000:41:00.4 "0000:41:00.4 " x; do
	expect_err "$EINVAL" mkdir "$MNT/$bad"
done
assert_eq "$(ls "$MNT" | grep -c :)" 0 "VFs after bad mkdirs"
mkdir "$V"
expect_err "$EEXIST" mkdir "$V"
expect_err "$EEXIST" mkdir "$MNT/threshold"
expect_err "$EPERM" mkdir "$V/extra"
assert_eq "$(ls "$V" | tr '\n' ' ')" "assignments failures history parent quarantined report since state tally " "ls VF"
assert_eq "$(stat -c '%a %F' "$V")" "755 directory" "stat VF dir"
assert_eq "$(stat -c '%a %F' "$V/assignments")" "775 directory" "stat assignments"
for f in tally failures state since; do
	assert_eq "$(stat -c '%a %s' "$V/$f")" "444 0" "stat $f"
done
assert_eq "$(stat -c '%a %s' "$V/report")" "664 0" "stat report"
# "0\n" or "1\n": the one file with a known size (page-cached)
assert_eq "$(stat -c '%a %s' "$V/quarantined")" "664 2" "stat quarantined"
# Inodes are stable: the same numbers on every lookup.
ino=$(stat -c %i "$V/tally")
assert_eq "$(stat -c %i "$V/tally")" "$ino" "inode of tally"

# --- a fresh VF
assert_cat "$V/tally" 0
assert_cat "$V/quarantined" 0
assert_cat "$V/failures" ""
assert_cat "$V/report" "" # nothing written on this open file

# --- report: outcomes read back on the same open file
out=$("$VFTOOL" write-read "$V/report" "failed vm-1 $T0 nvrm: RmInitAdapter failed!")
assert_eq "$out" "recorded failures=1 threshold=2" "first failure"
out=$("$VFTOOL" write-read "$V/report" "failed vm-1 $T0 again")
assert_eq "$out" "unchanged failures=1 threshold=2" "duplicate failure"
assert_cat "$V/tally" 1
# Through sh -c echo too; an empty ASSIGNED_AT is "-" and the message may be empty.
put "$V/report" "failed vm-2 -"
assert_cat "$V/tally" 2
assert_cat "$V/quarantined" 1
assert_cat "$MNT/quarantined" 0000:41:00.4
failures=$(cat "$V/failures")
assert_eq "$(wc -l <<<"$failures")" 2 "failure lines"
ts='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{9}Z'
assert_match "$(sed -n 1p <<<"$failures")" "^$ts vm-1 2026-11-29T07:00:00\.000000000Z nvrm: RmInitAdapter failed!\$" "failure 1"
assert_match "$(sed -n 2p <<<"$failures")" "^$ts vm-2 -\$" "failure 2"
out=$("$VFTOOL" write-read "$V/report" "failed vm-3 $T1 late")
assert_eq "$out" "unchanged failures=2 threshold=2" "failure on a quarantined VF"

# A success clears the matching failure and every older one, and rescinds.
out=$("$VFTOOL" write-read "$V/report" "ok vm-9 $T0")
assert_eq "$out" "cleared=0 rescinded=0" "success with nothing to clear"
out=$("$VFTOOL" write-read "$V/report" "ok vm-2 -")
assert_eq "$out" "cleared=2 rescinded=1" "success clearing both"
assert_cat "$V/tally" 0
assert_cat "$V/quarantined" 0
assert_cat "$MNT/quarantined" ""

# Bad reports: EINVAL and nothing changes.
put "$V/report" "failed vm-4 $T1 keep"
for bad in "" failed "failed vm-5" "failed .vm $T0" "failed vm/5 $T0" "failed vm-5 yesterday" \
	"failed vm-5 2026-13-01T00:00:00Z" "ok vm-4 $T1 extra" "ok vm-4" "bogus vm-4 $T1" \
	"failed  vm-5 $T0" "FAILED vm-5 $T0"; do
	expect_err "$EINVAL" put "$V/report" "$bad"
done
expect_err "$EINVAL" putf "$V/report" 'failed vm-5 %s a\nsecond line' "$T0"
expect_err "$EINVAL" "$VFTOOL" write-read "$V/report" "failed vm-$(head -c 129 /dev/zero | tr '\0' x) $T0"
assert_cat "$V/tally" 1
assert_eq "$(wc -l <"$V/failures")" 1 "failures after bad reports"
# Through one open file: each read shows its last write's outcome, and a
# refused write leaves none (not the accepted one before it): refused as
# a bad command (opened O_APPEND, so every write is a command), or for
# not being at offset 0 (the second write of a descriptor without it).
assert_eq "$("$VFTOOL" write-reads --append "$V/report" "failed vm-4 $T1 keep" "failed vm-5" \
	"ok vm-8 $T0")" "ok: unchanged failures=1 threshold=2"$'\n'"$EINVAL: "$'\n'"ok: cleared=0 rescinded=0" \
	"outcomes through one open file"
assert_eq "$("$VFTOOL" write-reads "$V/report" "failed vm-4 $T1 keep" "ok vm-8 $T0")" \
	"ok: unchanged failures=1 threshold=2"$'\n'"$EINVAL: " "a write past offset 0 through one open file"
assert_cat "$V/quarantined" 0

# A success for the oldest failure clears just that one; the quarantine
# stays while failures remain.
put "$V/report" "failed vm-5 $T0 newer"
assert_cat "$V/quarantined" 1
out=$("$VFTOOL" write-read "$V/report" "ok vm-4 $T1")
assert_eq "$out" "cleared=1 rescinded=0" "success for the oldest of two failures"
assert_cat "$V/tally" 1
assert_cat "$V/quarantined" 1
assert_match "$(cat "$V/failures")" "^$ts vm-5 2026-11-29T07:00:00\.000000000Z newer\$" "the failure left"

# --- quarantined: 0 = operator clear (failures dropped), 1 = manual quarantine
put "$V/quarantined" 0
assert_cat "$V/tally" 0
put "$V/quarantined" 1
assert_cat "$V/quarantined" 1
assert_cat "$V/tally" 0
out=$("$VFTOOL" write-read "$V/report" "ok vm-4 $T1")
assert_eq "$out" "cleared=0 rescinded=0" "a success never lifts a manual quarantine"
assert_cat "$V/quarantined" 1
for bad in 2 yes "" " 1" 01; do
	expect_err "$EINVAL" put "$V/quarantined" "$bad"
done
assert_cat "$V/quarantined" 1
put "$V/report" "failed vm-6 $T0 x"
put "$V/quarantined" 0
assert_cat "$V/quarantined" 0
assert_cat "$V/tally" 0
assert_cat "$V/failures" ""

# --- read-only files refuse writes, even from root
expect_err "$EACCES" put "$V/tally" 0
expect_err "$EACCES" put "$V/failures" x

# --- a long file reads whole, whatever st_size says
put "$MNT/threshold" 100
msg=$(head -c 1000 /dev/zero | tr '\0' m)
for i in 1 2 3 4 5 6; do
	put "$V/report" "failed vm-long-$i 2026-11-29T07:00:0${i}Z $msg"
done
assert_eq "$(wc -l <"$V/failures")" 6 "long failures file lines"
size=$(cat "$V/failures" | wc -c)
((size > 6000)) || fail "failures is $size bytes, expected > 6000"
assert_eq "$(grep -c "$msg\$" "$V/failures")" 6 "complete long lines"

# --- rmdir: EBUSY while tallied, quarantined or claimed; else unregisters
expect_err "$EBUSY" rmdir "$V"
put "$V/quarantined" 0
put "$V/quarantined" 1
expect_err "$EBUSY" rmdir "$V"
put "$V/quarantined" 0
touch "$V/assignments/vm-7"
expect_err "$EBUSY" rmdir "$V"
rm "$V/assignments/vm-7"
expect_err "$EPERM" rmdir "$V/assignments"
rmdir "$V"
expect_err "$ENOENT" stat "$V"
expect_err "$ENOENT" rmdir "$W"
assert_eq "$(ls "$MNT" | grep -c :)" 0 "VFs after rmdir"
# Registered again, it is a new VF with a new inode.
mkdir "$V"
assert_cat "$V/tally" 0
[[ $(stat -c %i "$V/tally") != "$ino" ]] || fail "inode reused after unregister"
expect_err "$ENOENT" cat "$W/report"

stop_daemon
echo "ok"
