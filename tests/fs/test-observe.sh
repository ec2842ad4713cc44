#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Observe mode on a real mount: `mode` reads enforce by default
# and takes enforce or observe from root or the writers' group; in observe
# mode the rules run and the files show what enforcement would do (state,
# quarantined, resources) while claims on a VF out of service succeed (one
# live claim per VF still); the mode survives a restart and shows in
# metrics; switching to enforce refuses such claims at once and keeps the
# live ones; each switch is logged once with the writer's uid and pid.
source "$(dirname "$0")/lib.sh"
require_fuse
require_cmd setpriv:util-linux
start_daemon --group nogroup

A=$MNT/0000:41:00.4
B=$MNT/0000:41:00.5
T1=2026-11-29T07:00:01Z
T2=2026-11-29T07:00:02Z
mkdir "$A" "$B"
metric() { sed -n "s/^$1 //p" "$MNT/metrics"; }
# switch_lines MODE: the audit lines of switches to MODE
switch_lines() { grep -c "write to mode accepted (uid [0-9]*, pid [0-9]*): $1\$" "$DAEMON_LOG" || true; }

# --- the default, the file's mode and owner, bad input changes nothing
assert_cat "$MNT/mode" enforce
assert_eq "$(stat -c '%a %G' "$MNT/mode")" "664 nogroup" "mode's mode and group"
assert_eq "$(metric vfhealth_observe_mode)" 0 "vfhealth_observe_mode in enforce mode"
for bad in bogus OBSERVE "observe x" ""; do
	expect_err "$EINVAL" put "$MNT/mode" "$bad"
done
expect_err "$EACCES" as_user 65533 sh -c 'echo observe > "$1"' sh "$MNT/mode"
assert_cat "$MNT/mode" enforce

# --- a group member switches to observe: one line with its uid and pid
pid=$(as_user 65534 sh -c 'echo $$; exec /bin/echo observe >"$1"' sh "$MNT/mode") ||
	fail "the writers' group cannot write mode"
assert_cat "$MNT/mode" observe
grep -qx "<5>vfhealthd: write to mode accepted (uid 65534, pid $pid): observe" "$DAEMON_LOG" ||
	fail "no audit line with uid 65534 and pid $pid: $(grep 'mode accepted' "$DAEMON_LOG")"
put "$MNT/mode" observe # no switch: no line
assert_eq "$(switch_lines observe)" 1 "lines logging the switch to observe"
assert_eq "$(metric vfhealth_observe_mode)" 1 "vfhealth_observe_mode in observe mode"

# --- the rules run: A is quarantined and every file says so ...
put "$A/report" "failed vm-c $T1 RmInitAdapter failed"
put "$A/report" "failed vm-d $T2 RmInitAdapter failed"
assert_cat "$A/state" quarantined
assert_cat "$A/quarantined" 1
assert_cat "$MNT/quarantined" "0000:41:00.4"
resources=$(cat "$MNT/resources")
assert_match "$resources" $'\nallocatable_slots 1\n' "resources: what enforcement would allocate"
assert_match "$resources" $'\nquarantined_slots 1' "resources: the would-be quarantine"
# ... but a claim on it succeeds; one live claim per VF still holds
touch "$A/assignments/vm-1" || fail "a claim on a quarantined VF was refused in observe mode"
expect_err "$EBUSY" touch "$A/assignments/vm-2"
put "$B/quarantined" 1 # an operator hold: the same
touch "$B/assignments/vm-3" || fail "a claim on a held VF was refused in observe mode"
assert_cat "$B/state" held
assert_match "$(cat "$MNT/resources")" $'\nused_slots 2\nallocatable_slots 0\nquarantined_slots 2' "resources with both claimed"

# --- the mode survives a restart
stop_daemon
start_daemon --group nogroup
assert_cat "$MNT/mode" observe
assert_eq "$(metric vfhealth_observe_mode)" 1 "vfhealth_observe_mode after a restart"

# --- enforce: the computed state applies at once; live claims stay
put "$MNT/mode" enforce
assert_eq "$(switch_lines enforce)" 1 "lines logging the switch to enforce"
assert_eq "$(metric vfhealth_observe_mode)" 0 "vfhealth_observe_mode back in enforce mode"
assert_eq "$(ls "$A/assignments" "$B/assignments" | grep -c vm-)" 2 "live claims after the switch"
rm "$A/assignments/vm-1"
expect_err "$EBUSY" touch "$A/assignments/vm-1"
expect_err "$EBUSY" touch "$B/assignments/vm-4"
assert_cat "$A/state" quarantined
stop_daemon
start_daemon --group nogroup
assert_cat "$MNT/mode" enforce
expect_err "$EBUSY" touch "$A/assignments/vm-1"
stop_daemon
echo "ok"
