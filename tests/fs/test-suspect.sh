#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Suspect VFs on a real mount: a release with ended=crash (and died_at=)
# whose death falls within --init-window after claimed_at makes the VF
# suspect: `state` reads suspect with `since`, it stays claimable,
# `allocatable` ranks it after every clean VF, `history` says which claim
# and how long after it the VMM died; a plain release, a death after the
# window, or a window of 0 never does; bad death times change nothing; the
# next OK of a later assignment clears it, `echo 0` too; failures count as
# usual (a quarantine confirms it); a restart and observe mode keep it; the
# metrics and one log line per transition say so.
source "$(dirname "$0")/lib.sh"
require_fuse
start_daemon --init-window 60

for f in 1 2 3 4 5; do
	mkdir "$MNT/0000:41:00.$f"
done
A=$MNT/0000:41:00.1 B=$MNT/0000:41:00.2 C=$MNT/0000:41:00.3 D=$MNT/0000:41:00.4
E=$MNT/0000:41:00.5
claimed_at() { sed -n 's/^claimed_at=//p' "$1"; }
# seconds S after (or before, negative) the RFC 3339 time T, canonical
shift_time() { date -u -d "@$(($(date -u -d "$1" +%s) + $2))" +%Y-%m-%dT%H:%M:%S.000000000Z; }
metric() { grep -F "$1 " "$MNT/metrics" | awk '{print $2}'; }

# --- bad input changes nothing: the claim stays, the VF is not suspect.
# The claim's creator names its time: a second ago (whole seconds), so that
# a death a second after it is no later than now.
c1=$(shift_time "$(date -u +%Y-%m-%dT%H:%M:%SZ)" -1)
put "$A/assignments/vm-1" "claimed_at=$c1"
assert_eq "$(claimed_at "$A/assignments/vm-1")" "$c1" "the claim's own time"
expect_err "$EINVAL" put "$A/assignments/vm-1" "ended=crash"
expect_err "$EINVAL" put "$A/assignments/vm-1" "release=$c1"$'\n'"died_at=$c1"
expect_err "$EINVAL" put "$A/assignments/vm-1" "release=$c1"$'\n'"ended=crashed"
expect_err "$EINVAL" put "$A/assignments/vm-1" "release=$c1"$'\n'"ended=crash"$'\n'"died_at=$(shift_time "$c1" -5)"
expect_err "$EINVAL" put "$A/assignments/vm-1" "release=$c1"$'\n'"ended=crash"$'\n'"died_at=2999-01-01T00:00:00Z"
assert_eq "$(ls "$A/assignments")" vm-1 "the claim after refused releases"
assert_cat "$A/state" ok
assert_cat "$A/since" ""

# --- dead 1 s after its claim: suspect
c1plus=$(shift_time "$c1" 1)
putf "$A/assignments/vm-1" 'release=%s\nended=crash\ndied_at=%s\n' "$c1" "$c1plus"
assert_eq "$(ls "$A/assignments")" "" "released"
assert_cat "$A/state" suspect
assert_match "$(cat "$A/since")" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z$' "since of a suspect VF"
assert_cat "$A/quarantined" 0
grep -q "vf 0000:41:00.1: suspect: the VMM of vm-1 (claimed $c1) died 1\.000 s after its claim" "$DAEMON_LOG" ||
	fail "no log line for the suspicion"
mapfile -t h <"$A/history"
assert_match "${h[0]}" "^$c1 claim vm-1 released=[^ ]+ ended=crashed by=0\$" "the crashed claim"
assert_match "${h[1]}" "^[^ ]+ suspect vm-1 claimed=$c1 died=$c1plus after=1\.000s cleared=- why=-\$" "the suspicion"
# ranked after every clean VF, every read
for i in 1 2 3 4 5 6 7 8; do
	mapfile -t al <"$MNT/allocatable"
	assert_eq "${#al[@]}" 5 "allocatable VFs"
	assert_eq "${al[4]}" "0000:41:00.1" "the suspect VF last (read $i)"
done
assert_eq "$(metric 'vfhealth_vf_suspect{vf="0000:41:00.1",parent=""}')" 1 "vfhealth_vf_suspect"
assert_eq "$(metric 'vfhealth_vf_suspect{vf="0000:41:00.2",parent=""}')" 0 "vfhealth_vf_suspect of a clean VF"

# --- a plain release never makes a VF suspect, conditional or not
touch "$B/assignments/vm-2"
put "$B/assignments/vm-2" "release=$(claimed_at "$B/assignments/vm-2")"
touch "$B/assignments/vm-3"
rm "$B/assignments/vm-3"
assert_cat "$B/state" ok

# --- dead after the window: a claim made 2 minutes ago (its creator names it)
old=$(shift_time "$(date -u +%Y-%m-%dT%H:%M:%SZ)" -120)
put "$C/assignments/vm-4" "claimed_at=$old"
assert_eq "$(claimed_at "$C/assignments/vm-4")" "$old" "the claim's own time"
put "$C/assignments/vm-4" "release=$old"$'\n'"ended=crash"
assert_cat "$C/state" ok
# ... and just inside it, died_at left to the write's time
touch "$C/assignments/vm-5"
put "$C/assignments/vm-5" "release=$(claimed_at "$C/assignments/vm-5")"$'\n'"ended=crash"
assert_cat "$C/state" suspect

# --- claimable; the next guest's OK clears it (an older assignment's does not)
touch "$A/assignments/vm-6"
c6=$(claimed_at "$A/assignments/vm-6")
put "$A/report" "ok vm-1 $c1"
assert_cat "$A/state" suspect
put "$A/report" "ok vm-6 $c6"
assert_cat "$A/state" ok
assert_cat "$A/since" ""
grep -q "0000:41:00.1: no longer suspect: instance vm-6 (claimed $c6) succeeded" "$DAEMON_LOG" ||
	fail "no log line for the clearing OK"
mapfile -t h <"$A/history"
assert_match "${h[1]}" " suspect vm-1 claimed=$c1 died=[^ ]+ after=[^ ]+ cleared=[^ -][^ ]* why=ok:vm-6\$" "cleared by OK"
assert_eq "$(metric 'vfhealth_suspect_total{outcome="cleared"}')" 1 "cleared suspicions"
rm "$A/assignments/vm-6"

# --- echo 0 clears it
assert_cat "$C/state" suspect
put "$C/quarantined" 0
assert_cat "$C/state" ok
grep -q "0000:41:00.3: no longer suspect: cleared by the operator" "$DAEMON_LOG" ||
	fail "no log line for the operator's clear"
assert_eq "$(metric 'vfhealth_suspect_total{outcome="cleared"}')" 2 "cleared suspicions"

# --- failures count as usual: one (below the threshold 2) leaves it suspect,
# the second quarantines it and confirms the suspicion
touch "$D/assignments/vm-7"
put "$D/assignments/vm-7" "release=$(claimed_at "$D/assignments/vm-7")"$'\n'"ended=crash"
assert_cat "$D/state" suspect
put "$D/report" "failed vm-8 2026-11-29T07:00:01Z NVRM: RmInitAdapter failed!"
assert_cat "$D/state" suspect
assert_cat "$D/tally" 1
assert_cat "$D/quarantined" 0
put "$D/report" "failed vm-9 2026-11-29T07:00:02Z NVRM: RmInitAdapter failed!"
assert_cat "$D/state" quarantined
assert_cat "$D/quarantined" 1
assert_eq "$(metric 'vfhealth_suspect_total{outcome="confirmed"}')" 1 "confirmed suspicions"
assert_match "$(cat "$D/history")" " suspect vm-7 claimed=[^ ]+ died=[^ ]+ after=[^ ]+ cleared=[^ -][^ ]* why=quarantined" "confirmed in the history"

# --- a restart keeps it; observe mode shows it the same way
touch "$E/assignments/vm-10"
put "$E/assignments/vm-10" "release=$(claimed_at "$E/assignments/vm-10")"$'\n'"ended=crash"
since=$(cat "$E/since")
stop_daemon
start_daemon --init-window 60
assert_cat "$E/state" suspect
assert_cat "$E/since" "$since"
put "$MNT/mode" observe
assert_cat "$E/state" suspect
mapfile -t al <"$MNT/allocatable"
# observe: every unclaimed VF, D (quarantined) with the held-back ones, last
assert_eq "${al[-2]}" "0000:41:00.5" "the suspect VF after the clean ones in observe mode"
assert_eq "${al[-1]}" "0000:41:00.4" "the quarantined VF last in observe mode"
put "$MNT/mode" enforce
stop_daemon

# --- a window of 0 is off
start_daemon --init-window 0
touch "$B/assignments/vm-11"
put "$B/assignments/vm-11" "release=$(claimed_at "$B/assignments/vm-11")"$'\n'"ended=crash"
assert_cat "$B/state" ok
stop_daemon
echo "ok"
