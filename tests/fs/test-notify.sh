#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Change notification both ways (inotify and sysfs-style poll) for changes
# made inside the daemon: files nobody wrote to directly change because
# another process wrote a report, or because the threshold changed.
source "$(dirname "$0")/lib.sh"
require_fuse
require_cmd inotifywait:inotify-tools
start_daemon

make_vfs V W

# --- a report written by another process changes tally and failures (and
# then quarantined, top-level quarantined and resources)
start_inotify files "$V/tally" "$V/quarantined" "$MNT"
start_poll tally "$V/tally" 1
start_poll top_quarantined "$MNT/quarantined" 0000:41:00.4
start_poll vf_quarantined "$V/quarantined" 1
start_poll resources "$MNT/resources" $'total_slots 2\nused_slots 0\nallocatable_slots 1\nquarantined_slots 1'
before=$(stat -c %y "$V/tally")

sh -c 'echo "failed vm-1 2026-11-29T07:00:00Z a" > "$1"' sh "$V/report"
expect_woken tally
expect_inotify files "$V/tally MODIFY"
expect_inotify files "$V/tally CLOSE_WRITE,CLOSE"
# Not quarantined yet: those pollers are still waiting (checked below).
sh -c 'echo "failed vm-2 2026-11-29T07:00:01Z b" > "$1"' sh "$V/report"
expect_woken top_quarantined
expect_woken vf_quarantined
expect_woken resources
expect_inotify files "$V/quarantined MODIFY"
expect_inotify files "$V/quarantined CLOSE_WRITE,CLOSE"
expect_inotify files "${MNT}/quarantined MODIFY" # the directory watch sees it by name
expect_inotify files "${MNT}/quarantined CLOSE_WRITE,CLOSE"
after=$(stat -c %y "$V/tally")
[[ $after != "$before" ]] || fail "mtime of tally did not change ($before)"

# --- a threshold change re-evaluates W: its quarantined file changes
sh -c 'echo "failed vm-3 2026-11-29T07:00:02Z c" > "$1"' sh "$W/report"
start_inotify reeval "$W/quarantined"
start_poll w_quarantined "$W/quarantined" 1
start_poll top_quarantined2 "$MNT/quarantined" $'0000:41:00.4\n0000:41:00.5'
start_poll threshold "$MNT/threshold" 1
put "$MNT/threshold" 1
expect_woken w_quarantined
expect_woken top_quarantined2
expect_woken threshold
expect_inotify reeval "$W/quarantined MODIFY"
expect_inotify reeval "$W/quarantined CLOSE_WRITE,CLOSE"

# --- an operator's clear and a claim notify too
start_poll tally_clear "$V/tally" 0
put "$V/quarantined" 0
expect_woken tally_clear
start_poll resources_claim "$MNT/resources" $'total_slots 2\nused_slots 1\nallocatable_slots 0\nquarantined_slots 1'
touch "$V/assignments/vm-9"
expect_woken resources_claim

# --- a file that did not change does not wake its poller
out=$("$VFTOOL" poll "$MNT/max_quarantined" 300 || true)
assert_eq "$out" $'armed\ntimeout' "poll on an unchanged file"
# Reading at offset 0 catches up: a new change wakes it again, an old one does not.
start_poll threshold2 "$MNT/threshold" 2
put "$MNT/threshold" 2
expect_woken threshold2

# The notifier's own writes changed nothing: everything still reads the same.
assert_cat "$MNT/threshold" 2
assert_cat "$V/tally" 0
assert_cat "$W/tally" 1
assert_cat "$MNT/quarantined" 0000:41:00.5

# --- the toucher is paced (NOTIFY_TOUCH_PACE_MS, 10 ms, doubling while
# changes keep coming, up to NOTIFY_TOUCH_PACE_MAX_MS, 100 ms): a burst of
# reports to one VF for 400 ms (or 900 reports) makes the kernel emit an IN_MODIFY
# on its tally at most once a pace, not once a report, and at most every
# 100 ms once the pace has grown (10 + 20 + 40 + 80 ms), and touches its
# state only when it changed.  The marker: a report to Y after the burst,
# whose tally is touched after X's last touch (same batch, later entry, or
# a later batch), so when its event is seen every touch of X's is counted.
X=$MNT/0000:41:00.6
Y=$MNT/0000:41:00.7
mkdir "$X" "$Y"
put "$MNT/threshold" 1000
start_inotify paced "$X/tally" "$X/state" "$Y/tally"
t0=${EPOCHREALTIME//[.,]/}
n=0
while ((${EPOCHREALTIME//[.,]/} - t0 < 400000 && n < 900)); do
	printf 'failed vm-p%d 2026-11-29T07:00:00Z burst' "$n" >"$X/report"
	n=$((n + 1))
done
put "$Y/report" "failed vm-marker 2026-11-29T07:00:00Z marker"
expect_inotify paced "$Y/tally MODIFY"
elapsed_ms=$(((${EPOCHREALTIME//[.,]/} - t0) / 1000))
assert_cat "$X/tally" "$n"
touches=$(sed "\|^$Y/tally MODIFY\$|q" "$T/paced.out" | grep -cx "$X/tally MODIFY")
((touches >= 1)) || fail "the burst was never announced"
((touches <= elapsed_ms / 10 + 2)) ||
	fail "$touches IN_MODIFY of X/tally in $elapsed_ms ms: the toucher is not paced"
# A stall of the burst longer than the pace starts the pace over: the bound
# leaves room for a few, where a pace that never grew makes one a 10 ms.
((n < elapsed_ms / 10 || touches <= elapsed_ms / 50 + 6)) ||
	fail "$touches IN_MODIFY of X/tally in $elapsed_ms ms ($n reports): the pace does not grow"
echo "paced: $n reports in $elapsed_ms ms, $touches IN_MODIFY on tally"
# Only the first report changed X's state (ok -> failing): one event, not
# one a batch.
assert_cat "$X/state" failing
assert_eq "$(sed "\|^$Y/tally MODIFY\$|q" "$T/paced.out" | grep -cx "$X/state MODIFY")" 1 \
	"IN_MODIFY on the state of a VF that went from ok to failing once"
stop_daemon
echo "ok"
