#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Permissions: everything world-readable; writable by root and by the
# --group; an unprivileged user's write gets EACCES from the kernel
# (allow_other,default_permissions).  Operations a sysfs-like tree does not
# have get EPERM.
source "$(dirname "$0")/lib.sh"
require_fuse
require_cmd setpriv:util-linux

V=$MNT/0000:41:00.4
T0=2026-11-29T07:00:00Z

# --- default group root: user nobody can read everything, write nothing
start_daemon
# The directory it created for the database is root's alone.
assert_eq "$(stat -c '%a %u' "$(dirname "$DB")")" "700 0" "the database directory vfhealthd created"
mkdir "$V"
touch "$V/assignments/vm-1"
for f in threshold quarantined resources status max_quarantined metrics held_back claims; do
	as_user 65534 cat "$MNT/$f" >/dev/null || fail "nobody cannot read $f"
done
for f in tally quarantined failures report state since assignments/vm-1; do
	as_user 65534 cat "$V/$f" >/dev/null || fail "nobody cannot read $f"
done
as_user 65534 ls "$MNT" "$V" "$V/assignments" >/dev/null || fail "nobody cannot list"
expect_err "$EACCES" as_user 65534 sh -c 'echo 3 > "$1"' sh "$MNT/threshold"
expect_err "$EACCES" as_user 65534 sh -c 'echo repair > "$1"' sh "$MNT/status"
expect_err "$EACCES" as_user 65534 sh -c 'echo 1 > "$1"' sh "$MNT/max_quarantined"
expect_err "$EACCES" as_user 65534 sh -c 'echo 1 > "$1"' sh "$V/quarantined"
expect_err "$EACCES" as_user 65534 sh -c 'echo "failed vm-1 $2 x" > "$1"' sh "$V/report" "$T0"
expect_err "$EACCES" as_user 65534 sh -c 'echo agent=vsock:3 > "$1"' sh "$V/assignments/vm-1"
expect_err "$EACCES" as_user 65534 touch "$V/assignments/vm-2"
expect_err "$EACCES" as_user 65534 mkdir "$MNT/0000:41:00.5"
expect_err "$EACCES" as_user 65534 rm -f "$V/assignments/vm-1"
expect_err "$EACCES" as_user 65534 rmdir "$V"
# Nothing changed.
assert_cat "$MNT/threshold" 2
assert_cat "$V/tally" 0
assert_cat "$V/quarantined" 0
assert_eq "$(ls "$V/assignments")" vm-1 "claims"
assert_eq "$(ls "$MNT" | grep -c :)" 1 "VFs"

# --- even root: modes and owners are fixed, no renames, links or removals
expect_err "$EPERM" chmod 666 "$MNT/threshold"
expect_err "$EPERM" chown 65534 "$MNT/threshold"
expect_err "$EPERM" chgrp 65534 "$V"
expect_err "$EPERM" rm -f "$MNT/threshold"
expect_err "$EPERM" rm -f "$V/tally"
expect_err "$EPERM" mv "$MNT/threshold" "$MNT/threshold2"
expect_err "$EPERM" ln "$MNT/threshold" "$MNT/threshold2"
expect_err "$EPERM" ln -s threshold "$MNT/link"
expect_err "$EACCES" touch "$MNT/newfile"
assert_eq "$(stat -c '%a %U %G' "$MNT/threshold")" "664 root root" "after chmod/chown"
stop_daemon

# --- --group: its members write; other users still cannot
start_daemon --group nogroup
assert_eq "$(stat -c '%a %G' "$MNT")" "775 nogroup" "root dir group"
assert_eq "$(stat -c '%a %G' "$MNT/threshold")" "664 nogroup" "threshold group"
assert_eq "$(stat -c '%a %G' "$MNT/metrics")" "444 nogroup" "metrics group"
assert_eq "$(stat -c '%a %G' "$V/assignments")" "775 nogroup" "assignments group"
as_user 65534 sh -c 'echo 3 > "$1"' sh "$MNT/threshold"
assert_cat "$MNT/threshold" 3
as_user 65534 mkdir "$MNT/0000:41:00.5"
as_user 65534 sh -c 'echo "failed vm-9 $2 x" > "$1"' sh "$MNT/0000:41:00.5/report" "$T0"
assert_cat "$MNT/0000:41:00.5/tally" 1
as_user 65534 rm "$V/assignments/vm-1"
as_user 65534 touch "$V/assignments/vm-2"
assert_eq "$(ls "$V/assignments")" vm-2 "claim by a group member"
# Group membership is what grants it: another user without it is refused.
expect_err "$EACCES" as_user 65533 sh -c 'echo 4 > "$1"' sh "$MNT/threshold"
expect_err "$EACCES" as_user 65533 mkdir "$MNT/0000:41:00.6"
# Read-only files stay read-only for the group too.
expect_err "$EACCES" as_user 65534 sh -c 'echo 1 > "$1"' sh "$MNT/quarantined"
assert_cat "$MNT/threshold" 3
stop_daemon

# --- a group that does not exist is refused at start
expect_err "unknown group" "$VFHEALTHD" -f --group no-such-group-vfhealth --db "$DB" "$MNT"
echo "ok"
