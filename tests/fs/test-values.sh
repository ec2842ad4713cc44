#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Strict values and honest sizes: numbers have one
# spelling (no sign, no leading zero); no control character reaches a
# reader (agent= and control= refuse them, report messages are sanitized);
# read-only files refuse truncation and time changes with EACCES even for
# root; every file reports size 0 (procfs style), so tail, wc -c, grep and
# head read it to the end.
source "$(dirname "$0")/lib.sh"
require_fuse

V=$MNT/0000:41:00.4
T0=2026-11-29T07:00:00Z
ESC=$'\x1b' CR=$'\r' BEL=$'\a'

start_daemon
mkdir "$V"
touch "$V/assignments/vm-1"
put "$V/assignments/vm-1" "agent=vsock:3"$'\npid='"$$"

# --- canonical numbers only
for bad in 03 003 00 +3 " 3" 0x3; do
	expect_err "$EINVAL" put "$MNT/threshold" "$bad"
done
expect_err "$EINVAL" put "$MNT/max_quarantined" 00
expect_err "$EINVAL" put "$MNT/max_quarantined" 01
put "$MNT/max_quarantined" 0
put "$MNT/threshold" 3
assert_cat "$MNT/threshold" 3
expect_err "$EINVAL" put "$V/assignments/vm-1" "pid=01"
expect_err "$EINVAL" put "$V/assignments/vm-1" "agent=vsock:03"$'\npid='"$$"
expect_err "$EINVAL" put "$V/assignments/vm-1" "agent=vsock:3:02222"$'\npid='"$$"

# --- no control characters: refused in agent= and control= ...
for c in "$ESC" "$CR" "$BEL" $'\t' $'\x7f'; do
	expect_err "$EINVAL" putf "$V/assignments/vm-1" 'agent=unix:/run/a%sb' "$c"
	expect_err "$EINVAL" putf "$V/assignments/vm-1" 'agent=hvsock:/run/a%sb:2222' "$c"
	expect_err "$EINVAL" putf "$V/assignments/vm-1" 'control=/run/a%sb' "$c"
done
assert_eq "$(sed -n 's/^agent=//p' "$V/assignments/vm-1")" "vsock:3:2222" "agent after refused writes"
# ... and sanitized in report messages (kept, as spaces)
putf "$V/report" 'failed vm-7 %s NVRM: %s[31mred%s bell%s\n' "$T0" "$ESC" "$CR" "$BEL"
assert_eq "$(sed -n 's/.* vm-7 .* NVRM: //p' "$V/failures")" " [31mred  bell " "sanitized message"
if LC_ALL=C grep -q '[[:cntrl:]]' "$V/failures" "$V/assignments/vm-1"; then
	fail "a reader sees a control character"
fi
! grep -q "$ESC" "$DAEMON_LOG" || fail "the log shows an escape character"

# --- read-only files: truncation and times are EACCES, even for root
for f in "$MNT/quarantined" "$MNT/resources" "$MNT/metrics" "$V/tally" "$V/failures"; do
	expect_err "$EACCES" truncate -s 0 "$f"
	expect_err "$EACCES" touch "$f"
	expect_err "$EACCES" touch -d @0 "$f"
done
expect_err "$EPERM" chmod 644 "$V/failures"
assert_cat "$V/tally" 1
# Writable files and claims still take O_TRUNC and touch (no-ops).
truncate -s 0 "$MNT/threshold"
touch "$MNT/threshold" "$V/assignments/vm-1" "$V/quarantined"
assert_cat "$MNT/threshold" 3

# --- sizes: 0, like procfs; readers that trust st_size read it right
put "$MNT/threshold" 100
for i in 1 2 3 4 5; do
	put "$V/report" "failed vm-$i $T0 NVRM: failure number $i"
done
for f in "$MNT/threshold" "$MNT/metrics" "$V/failures" "$V/report" "$V/assignments/vm-1"; do
	assert_eq "$(stat -c %s "$f")" 0 "size of $f"
done
for f in "$MNT/metrics" "$MNT/resources" "$V/failures" "$V/assignments/vm-1"; do
	content=$(cat "$f")
	assert_eq "$(tail -n1 "$f")" "$(tail -n1 <<<"$content")" "tail -n1 $f"
	assert_eq "$(wc -c <"$f")" "$(cat "$f" | wc -c)" "wc -c < $f"
	assert_eq "$(wc -c "$f" | cut -d' ' -f1)" "$(cat "$f" | wc -c)" "wc -c $f"
	assert_eq "$(head -c 5 "$f")" "${content:0:5}" "head -c 5 $f"
done
assert_match "$(tail -n1 "$V/failures")" " vm-5 .*failure number 5$" "last failure"
assert_eq "$(grep -c 'failure number' "$V/failures")" 5 "grep -c"
stop_daemon
echo "ok"
