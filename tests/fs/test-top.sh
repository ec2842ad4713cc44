#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The top-level files of vfhealth(5): threshold, quarantined, resources,
# status, max_quarantined, metrics, held_back, and the write rules every file
# follows.
source "$(dirname "$0")/lib.sh"
require_fuse
start_daemon

A=$MNT/0000:41:00.4
B=$MNT/0000:41:00.5
C=$MNT/0000:03:00.1

# --- the listing and the attributes
assert_eq "$(ls "$MNT" | tr '\n' ' ')" "allocatable auto_recover claims gpus held_back max_quarantined metrics mode quarantined resources status threshold " "ls"
assert_eq "$(stat -c '%a %u %g %F' "$MNT")" "775 0 0 directory" "stat root"
for f in threshold status max_quarantined; do
	assert_eq "$(stat -c '%a %u %g %F %s' "$MNT/$f")" "664 0 0 regular empty file 0" "stat $f"
done
for f in quarantined resources metrics held_back claims; do
	assert_eq "$(stat -c '%a %u %g %F %s' "$MNT/$f")" "444 0 0 regular empty file 0" "stat $f"
done

# --- threshold: 2 by default, 1..1000, bad input changes nothing
assert_cat "$MNT/threshold" 2
put "$MNT/threshold" 5
assert_cat "$MNT/threshold" 5
putf "$MNT/threshold" 4 # no trailing newline
assert_cat "$MNT/threshold" 4
for bad in 0 1001 abc "" -1 " 3" "3 " 2x 99999999999999999999 $'3\n4'; do
	expect_err "$EINVAL" put "$MNT/threshold" "$bad"
done
assert_cat "$MNT/threshold" 4
put "$MNT/threshold" 1000
assert_cat "$MNT/threshold" 1000
put "$MNT/threshold" 1
assert_cat "$MNT/threshold" 1

# --- the write rules: one write(2) at offset 0, at most 4096 bytes, O_TRUNC ok
expect_err "$EINVAL" "$VFTOOL" write-at "$MNT/threshold" 1 3
expect_err "$EINVAL" sh -c 'head -c 5000 /dev/zero | tr "\0" 7 > "$1"' sh "$MNT/threshold"
sh -c '/bin/echo 6 >> "$1"' sh "$MNT/threshold" # O_APPEND: the kernel's offset is not ours
assert_cat "$MNT/threshold" 6
put "$MNT/threshold" 1
truncate -s 0 "$MNT/threshold" # a no-op, so `echo X > file` works
assert_cat "$MNT/threshold" 1
put "$MNT/threshold" 2

# --- quarantined: sorted addresses, an empty file when none
assert_cat "$MNT/quarantined" ""
assert_eq "$(stat -c %s "$MNT/quarantined")" 0 "size: 0, as in procfs (test-values.sh)"
mkdir "$B" "$A" "$C"
# B and C are quarantined automatically (two failed assignments each): the
# breaker's cap below counts these, never operator holds.
for vf in "$B" "$C"; do
	put "$vf/report" "failed vm-x1 -"
	put "$vf/report" "failed vm-x2 -"
done
assert_cat "$MNT/quarantined" $'0000:03:00.1\n0000:41:00.5'

# --- resources: every slot counted once
touch "$A/assignments/vm-1"
assert_cat "$MNT/resources" $'total_slots 3\nused_slots 1\nallocatable_slots 0\nquarantined_slots 2'
rm "$A/assignments/vm-1"
assert_cat "$MNT/resources" $'total_slots 3\nused_slots 0\nallocatable_slots 1\nquarantined_slots 2'

# --- status: ok, and repair succeeds on a healthy store; nothing else accepted
assert_cat "$MNT/status" ok
put "$MNT/status" repair
assert_cat "$MNT/status" ok
expect_err "$EINVAL" put "$MNT/status" ok
expect_err "$EINVAL" put "$MNT/status" "repair now"

# --- max_quarantined: the breaker cap, 0 = none
assert_cat "$MNT/max_quarantined" 0
for bad in -1 abc "" 65537 " 1"; do
	expect_err "$EINVAL" put "$MNT/max_quarantined" "$bad"
done
assert_cat "$MNT/max_quarantined" 0
put "$MNT/max_quarantined" 2
assert_cat "$MNT/max_quarantined" 2
# Two VFs are quarantined: a third reaching the threshold is held back.
assert_cat "$MNT/held_back" ""
out=$("$VFTOOL" write-read "$A/report" "failed vm-a 2026-11-29T07:00:00Z one")
assert_eq "$out" "recorded failures=1 threshold=2" "first report"
out=$("$VFTOOL" write-read "$A/report" "failed vm-b 2026-11-29T07:01:00Z two")
assert_eq "$out" "recorded failures=2 threshold=2 breaker=engaged" "report held back by the breaker"
assert_cat "$A/quarantined" 0
assert_cat "$MNT/held_back" 0000:41:00.4
assert_match "$(cat "$MNT/metrics")" $'\nvfhealth_breaker_engaged 1\n' "metrics while the breaker holds"

# Lifting the cap re-evaluates: the held-back VF is quarantined now.
put "$MNT/max_quarantined" 0
assert_cat "$A/quarantined" 1
assert_cat "$MNT/held_back" ""
assert_match "$(cat "$MNT/metrics")" $'\nvfhealth_breaker_engaged 0\n' "metrics after the cap is lifted"

# --- threshold re-evaluates every VF: a VF whose tally meets a lowered
# threshold is quarantined; raising it never lifts a quarantine.
put "$A/quarantined" 0
out=$("$VFTOOL" write-read "$A/report" "failed vm-c 2026-11-29T07:02:00Z three")
assert_eq "$out" "recorded failures=1 threshold=2" "report after the clear"
put "$MNT/threshold" 3
assert_cat "$A/quarantined" 0
put "$MNT/threshold" 1
assert_cat "$A/quarantined" 1
assert_cat "$MNT/quarantined" $'0000:03:00.1\n0000:41:00.4\n0000:41:00.5'
put "$MNT/threshold" 10
assert_cat "$A/quarantined" 1

# --- metrics: Prometheus text, HELP and TYPE for every family
metrics=$(cat "$MNT/metrics")
for family in vfhealth_vfs vfhealth_quarantined_vfs vfhealth_store_unavailable \
	vfhealth_breaker_engaged vfhealth_reports_total; do
	assert_match "$metrics" "# HELP $family " "HELP $family"
	assert_match "$metrics" "# TYPE $family (gauge|counter)"$'\n' "TYPE $family"
done
assert_match "$metrics" $'\nvfhealth_vfs 3\n' "vfhealth_vfs"
assert_match "$metrics" $'\nvfhealth_quarantined_vfs 3\n' "vfhealth_quarantined_vfs"
assert_match "$metrics" $'\nvfhealth_store_unavailable 0\n' "vfhealth_store_unavailable"
assert_match "$metrics" $'\nvfhealth_reports_total\\{kind="failed",outcome="recorded"\\} 5\n' "recorded"
assert_match "$metrics" $'\nvfhealth_reports_total\\{kind="failed",outcome="quarantined"\\} 2\n' "quarantined"
for series in 'kind="failed",outcome="unchanged"' \
	'kind="ok",outcome="cleared"' 'kind="ok",outcome="unchanged"'; do
	assert_match "$metrics" $'\nvfhealth_reports_total\\{'"$series"$'\\} 0\n' "$series"
done
if command -v promtool >/dev/null; then
	out=$(promtool check metrics <<<"$metrics" 2>&1) || fail "promtool rejects metrics: $out"
fi
# Every sample belongs to a family that has a TYPE line.
while read -r name _; do
	[[ $name == "#" ]] && continue
	family=${name%%\{*}
	grep -q "^# TYPE $family " <<<"$metrics" || fail "metrics: $family has no TYPE line"
done <<<"$metrics"
# Read-only files stay read-only, even for root.
expect_err "$EACCES" put "$MNT/metrics" 1
expect_err "$EACCES" put "$MNT/quarantined" 0000:41:00.4
expect_err "$EACCES" put "$MNT/resources" 1
expect_err "$EACCES" put "$MNT/held_back" 0000:41:00.4

stop_daemon
echo "ok"
