#!/usr/bin/env bash
# example-vmm-claim.sh - examples/vmm/vfhealth-claim.sh against a real
# vfhealthd: claim writes the attributes and prints the stored claim with
# claimed_at; a second instance, a quarantined VF, an unknown VF, a bad
# attribute and an agent without its VMM are refused with exit 1 and leave
# no claim behind; release
# releases it, again by its claimed_at too, and refuses a claimed_at never
# claimed; the functions work when the file is sourced.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse

claim=$source_root/examples/vmm/vfhealth-claim.sh
mnt=$MNT
SOCKET_DIRS=() # the built-in socket directories, where a VMM manager's sockets live
start_daemon --no-sentinel
mkdir "$mnt/0000:41:00.4" "$mnt/0000:41:00.5"
export MOUNT=$mnt
used() { sed -n 's/^used_slots //p' "$mnt/resources"; }

out=$("$claim" claim 0000:41:00.4 vm-1 --agent vsock:7 --control /run/vfhealth-vmm/vm-1.sock --pid $$) ||
	fail "claim failed: $out"
grep -Eq '^claimed_at=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\.[0-9]{9}Z$' <<<"$out" || fail "no claimed_at in: $out"
grep -qx 'agent=vsock:7:2222' <<<"$out" || fail "agent not stored (canonical form expected): $out"
grep -qx 'control=/run/vfhealth-vmm/vm-1.sock' <<<"$out" || fail "control not stored: $out"
grep -qx "pid=$$" <<<"$out" || fail "pid not stored: $out"
[[ $(cat "$mnt/0000:41:00.4/assignments/vm-1") == "$out" ]] || fail "printed claim differs from the file"
[[ $(used) == 1 ]] || fail "used_slots $(used) after one claim"

# Refusals: exit 1, a reason, nothing changed.
refused() { # WANT-REASON ARGS...
	local want=$1 rc=0
	shift
	"$claim" claim "$@" >"$T/out" 2>&1 || rc=$?
	[[ $rc == 1 ]] || fail "claim $*: exit $rc, want 1: $(cat "$T/out")"
	grep -q "$want" "$T/out" || fail "claim $*: want '$want' in: $(cat "$T/out")"
}
refused "busy" 0000:41:00.4 vm-2 --agent vsock:8 --pid $$
[[ ! -e $mnt/0000:41:00.4/assignments/vm-2 ]] || fail "a second claim appeared"
refused "exists" 0000:41:00.4 vm-1
refused "not registered" 0000:41:00.7 vm-3
echo 1 > "$mnt/0000:41:00.5/quarantined"
refused "busy" 0000:41:00.5 vm-4 --agent vsock:9 --pid $$
echo 0 > "$mnt/0000:41:00.5/quarantined"
refused "attributes refused" 0000:41:00.5 vm-5 --agent tcp:1.2.3.4
refused "attributes refused" 0000:41:00.5 vm-5 --control /run/systemd/private
# an agent without its VMM is refused as a whole, at close: nothing is left
refused "claim refused" 0000:41:00.5 vm-5 --agent vsock:9
# a bad line after a good one: nothing is left either
refused "attributes refused" 0000:41:00.5 vm-5 --pid $$ --agent tcp:1.2.3.4
[[ -z $(ls "$mnt/0000:41:00.5/assignments") ]] || fail "a refused attribute left a claim"
[[ $(used) == 1 ]] || fail "used_slots $(used) after refusals"

# Release, and the VF can be claimed again (by the sourced function).
at=$(sed -n 's/^claimed_at=//p' "$mnt/0000:41:00.4/assignments/vm-1")
"$claim" release 0000:41:00.4 vm-1 || fail "release failed"
[[ ! -e $mnt/0000:41:00.4/assignments/vm-1 && $(used) == 0 ]] || fail "release left the claim"
"$claim" release 0000:41:00.4 vm-1 "$at" || fail "releasing by claimed_at again"
rc=0; "$claim" release 0000:41:00.4 vm-1 2>"$T/out" || rc=$?
[[ $rc == 1 ]] || fail "releasing with no claim: exit $rc"
rc=0; "$claim" release 0000:41:00.4 vm-1 2026-11-29T05:00:00Z 2>"$T/out" || rc=$?
if [[ $rc != 1 ]] || ! grep -q "ENOENT" "$T/out"; then
	fail "releasing a claim never made: exit $rc, $(cat "$T/out")"
fi
[[ -z $(ls "$mnt/0000:41:00.4/assignments") && $(used) == 0 ]] || fail "releases left a claim"
(
	# shellcheck source=../../examples/vmm/vfhealth-claim.sh
	. "$claim"
	vfhealth_claim 0000:41:00.4 vm-6 --agent hvsock:/run/vfhealth-vmm/vm-6.vsock --pid $$ >/dev/null
	[[ -e $MOUNT/0000:41:00.4/assignments/vm-6 ]]
	vfhealth_release 0000:41:00.4 vm-6
	# no agent: exclusion only, accepted
	vfhealth_claim 0000:41:00.4 vm-6 >/dev/null
	[[ -e $MOUNT/0000:41:00.4/assignments/vm-6 ]]
	vfhealth_release 0000:41:00.4 vm-6
) || fail "the sourced functions failed"
[[ $(used) == 0 ]] || fail "used_slots $(used) at the end"
echo "vmm claim OK"
