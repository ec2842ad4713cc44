#!/usr/bin/env bash
# example-drain.sh - examples/operator/drain-gpu.sh against a real vfhealthd
# and a fake sysfs tree (--sysfs-root, for both): it holds every registered
# VF of the parent and nothing else, finding them by VF/parent (learnt from
# sysfs physfn links at registration, or recorded by a write later, for a
# VF the parent's virtfn links do not list) and by the parent's virtfn
# links, skips unregistered ones, changes
# nothing on bad input or --dry-run, and --clear puts the VFs back with
# their failures dropped.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse

drain=$source_root/examples/operator/drain-gpu.sh
sys=$T/sys
devices=$sys/bus/pci/devices
# Parent 0000:41:00.0 with VFs .4 .5 .6 (as sysfs links them: virtfnN ->
# ../VF), parent 0000:42:00.0 with VF 0000:42:00.4.
mkdir -p "$devices/0000:41:00.0" "$devices/0000:42:00.0"
for i in 0 1 2; do
	mkdir -p "$devices/0000:41:00.$((i + 4))"
	ln -s "../0000:41:00.$((i + 4))" "$devices/0000:41:00.0/virtfn$i"
	ln -s ../0000:41:00.0 "$devices/0000:41:00.$((i + 4))/physfn"
done
mkdir -p "$devices/0000:42:00.4"
ln -s ../0000:42:00.4 "$devices/0000:42:00.0/virtfn0"
ln -s ../0000:42:00.0 "$devices/0000:42:00.4/physfn"

mnt=$MNT
start_daemon --no-sentinel --sysfs-root "$sys"
# .6 is not registered with vfhealthd; 41:00.7 has no virtfn link and its
# sysfs entry appears after its registration: its parent is recorded by a
# write of what its physfn link says.
mkdir "$mnt/0000:41:00.4" "$mnt/0000:41:00.5" "$mnt/0000:42:00.4" "$mnt/0000:41:00.7"
mkdir -p "$devices/0000:41:00.7"
ln -s ../0000:41:00.0 "$devices/0000:41:00.7/physfn"
echo 0000:41:00.0 > "$mnt/0000:41:00.7/parent"
[[ $(cat "$mnt/0000:41:00.4/parent") == 0000:41:00.0 ]] || fail "the parent was not read from sysfs"
report_failed "$mnt" 0000:41:00.5 vm-a

q() { cat "$mnt/$1/quarantined"; }
state() { cat "$mnt/quarantined"; echo "tally41.5=$(cat "$mnt/0000:41:00.5/tally")"; }
before=$(state)

# Bad input: a clear error, exit 2, nothing changed.
for bad in "0000:41:00" "0000:4G:00.0" "0000:43:00.0" "0000:41:00.4"; do
	rc=0
	"$drain" --mount "$mnt" --sysfs-root "$sys" "$bad" >"$T/out" 2>&1 || rc=$?
	[[ $rc == 2 ]] || fail "drain $bad: exit $rc, want 2: $(cat "$T/out")"
	grep -q "drain-gpu: " "$T/out" || fail "drain $bad: no message"
done
rc=0; "$drain" --mount "$T" --sysfs-root "$sys" 0000:41:00.0 >/dev/null 2>&1 || rc=$?
[[ $rc == 2 ]] || fail "a directory that is not a vfhealth mount was accepted"
[[ $(state) == "$before" ]] || fail "bad input changed the state"

# --dry-run says what it would do and does nothing.
out=$("$drain" --mount "$mnt" --sysfs-root "$sys" --dry-run 0000:41:00.0)
grep -qx "would quarantine 0000:41:00.4" <<<"$out" || fail "dry run: $out"
[[ $(state) == "$before" ]] || fail "--dry-run changed the state"

# The drain.
out=$("$drain" --mount "$mnt" --sysfs-root "$sys" 0000:41:00.0) || fail "drain failed: $out"
expected=$'quarantine 0000:41:00.4\nquarantine 0000:41:00.5\nskip   0000:41:00.6 (not registered with vfhealthd)\nquarantine 0000:41:00.7'
[[ $out == "$expected" ]] || fail "drain printed: $out"
[[ $(q 0000:41:00.4) == 1 && $(q 0000:41:00.5) == 1 && $(q 0000:41:00.7) == 1 ]] ||
	fail "the parent's VFs are not quarantined"
[[ $(q 0000:42:00.4) == 0 ]] || fail "another parent's VF was quarantined"
[[ $(cat "$mnt/quarantined") == $'0000:41:00.4\n0000:41:00.5\n0000:41:00.7' ]] || fail "quarantined: $(cat "$mnt/quarantined")"
# Drained by parent, without sysfs: the VFs that name it in VF/parent.
"$drain" --mount "$mnt" --sysfs-root "$T/nosys" --dry-run 0000:41:00.0 >"$T/out" ||
	fail "a drain by VF/parent alone failed: $(cat "$T/out")"
[[ $(cat "$T/out") == $'would quarantine 0000:41:00.4\nwould quarantine 0000:41:00.5\nwould quarantine 0000:41:00.7' ]] ||
	fail "a drain by VF/parent alone: $(cat "$T/out")"
[[ ! -e $mnt/0000:41:00.6 ]] || fail "an unregistered VF was registered"
# Draining again is harmless (a quarantined VF stays quarantined).
"$drain" --mount "$mnt" --sysfs-root "$sys" 0000:41:00.0 >/dev/null || fail "second drain failed"

# --clear after the SR-IOV cycle: back in service, failures dropped.
out=$("$drain" --mount "$mnt" --sysfs-root "$sys" --clear 0000:41:00.0) || fail "clear failed: $out"
grep -qx "clear 0000:41:00.5" <<<"$out" || fail "clear printed: $out"
[[ -z $(cat "$mnt/quarantined") ]] || fail "still quarantined: $(cat "$mnt/quarantined")"
[[ $(cat "$mnt/0000:41:00.5/tally") == 0 && -z $(cat "$mnt/0000:41:00.5/failures") ]] ||
	fail "--clear kept the failures"
echo "drain OK"
