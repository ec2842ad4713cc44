#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Root acts only on what sysfs shows, never on text a writer stored, driven
# by a member of the writers' group (vfhealthd --group, setpriv --groups)
# on a fake sysfs with a NIC (vendor 0x8086, SR-IOV) beside NVIDIA GPUs:
#   - VF/parent takes no address sysfs does not give (EPERM), so a writer
#     cannot make a device a GPU; the NIC's drain and cycle are refused
#     (EPERM, the reason logged), the program never runs, its sriov_numvfs
#     and virtfn links stay;
#   - the automatic policy's drain, like an operator's, covers a VF that
#     was registered before its sysfs entry existed and is claimed: the GPU
#     waits for it;
#   - the recovery thread checks again before the program: the automatic
#     policy's cycle of the NIC fails without running it, and so does one of
#     a GPU whose VF appeared in sysfs while the drain waited, and is claimed;
#   - a GPU's VFs are its virtfn links: such a VF is drained with the GPU
#     (out of allocatable) and holds a cycle off while its claim lives; a VF
#     sysfs shows under a drained GPU is never placed, registered or not;
#     the program's VFHEALTH_VFS lists exactly the virtfn VFs.
source "$(dirname "$0")/lib.sh"
require_fuse
require_cmd setpriv:util-linux
mount_tmpfs "$T/db" 4m 0700

GPU=0000:41:00.0 GPUB=0000:42:00.0 NIC=0000:51:00.0
VFS=(0000:41:00.1 0000:41:00.2)
LATE=0000:41:00.3  # registered before its sysfs entry exists, then claimed
SPARE=0000:41:00.4 # registered before its sysfs entry exists
UNREG=0000:41:00.5 # in sysfs, registered only once the GPU is drained
NEVER=0000:41:00.6 # in sysfs, never registered
VFB=0000:42:00.1 LATEB=0000:42:00.2 LATEB2=0000:42:00.3
NICVFS=(0000:51:00.1 0000:51:00.2)
fake_host

# The stand-in program records each call and what it was given.
mkdir -m 0755 "$T/bin"
printf '#!/bin/sh\necho "$1 numvfs=$VFHEALTH_NUMVFS vfs=$VFHEALTH_VFS" >>%s\n' "$T/calls" >"$T/bin/cycle"
chmod 0755 "$T/bin/cycle"
calls() { if [[ -e $T/calls ]]; then cat "$T/calls"; fi; }
# VFs are registered by hand here (mkdir), before and after sysfs shows them
DAEMON_ARGS+=(--register manual --recover-program "$T/bin/cycle")
start_daemon --group nogroup

WG=$(getent group nogroup | cut -d: -f3)
# attacker COMMAND...: as uid 65534, a member of the writers' group
attacker() { setpriv --reuid=65534 --regid=65534 --groups="$WG" "$@"; }
aput() { attacker sh -c '/bin/echo "$2" > "$1"' sh "$1" "$2"; }
state_is() { [[ $(cat "$MNT/gpus/$1/state") == "$2" ]]; }
wait_state() { wait_for 20 "GPU $1 $2" state_is "$1" "$2"; }
quarantine() { # quarantine VF: two distinct failed assignments
	put "$MNT/$1/report" "failed q1-${1//[:.]/-} 2026-11-29T07:00:00Z NVRM: RmInitAdapter failed!"
	put "$MNT/$1/report" "failed q2-${1//[:.]/-} 2026-11-29T07:01:00Z NVRM: RmInitAdapter failed!"
}
placeable() { grep -qx "$1" "$MNT/allocatable"; }
nic_sysfs() { ls -l "$SYSFS_DEVICES/$NIC"; cat "$SYSFS_DEVICES/$NIC/sriov_numvfs"; }
nic_before=$(nic_sysfs)

# --- the writer registers VFs; parents come from sysfs alone
for vf in "${VFS[@]}" "$LATE" "$SPARE" "$VFB" "$LATEB" "$LATEB2" "${NICVFS[0]}" 0000:5f:00.1; do
	attacker mkdir "$MNT/$vf"
done
assert_cat "$MNT/$LATE/parent" ""
assert_cat "$MNT/${NICVFS[0]}/parent" "$NIC" # a NIC's VF: gpus/NIC exists
expect_err "$EPERM" aput "$MNT/0000:5f:00.1/parent" "$NIC" # sysfs has no such VF
expect_err "$EPERM" aput "$MNT/$LATE/parent" "$GPU"        # nor a physfn for it yet
expect_err "$EPERM" aput "$MNT/${VFS[0]}/parent" "$NIC"    # sysfs says another
assert_cat "$MNT/0000:5f:00.1/parent" ""
assert_cat "$MNT/$LATE/parent" ""
assert_cat "$MNT/${VFS[0]}/parent" "$GPU"
grep -q "write to 0000:5f:00.1/parent refused (uid 65534, pid [0-9]*): parent: sysfs shows no physfn link" \
	"$DAEMON_LOG" || fail "the parent refusal is not logged"
assert_eq "$(ls "$MNT/gpus" | tr '\n' ' ')" "$GPU $GPUB $NIC " "gpus/"

# --- the NIC: its drain and its cycle are refused, for root too
expect_err "$EPERM" aput "$MNT/gpus/$NIC/drain" 1
expect_err "$EPERM" aput "$MNT/gpus/$NIC/recover" cycle
expect_err "$EPERM" put "$MNT/gpus/$NIC/drain" 1
assert_cat "$MNT/gpus/$NIC/state" serving
grep -q "write to gpus/$NIC/drain refused (uid 65534, pid [0-9]*): not an NVIDIA GPU: its sysfs vendor is not 0x10de" \
	"$DAEMON_LOG" || fail "the drain refusal is not logged"
grep -q "write to gpus/$NIC/recover refused (uid 65534, pid [0-9]*): not an NVIDIA GPU" "$DAEMON_LOG" ||
	fail "the cycle refusal is not logged"
assert_eq "$(calls)" "" "program calls"
assert_eq "$(nic_sysfs)" "$nic_before" "the NIC's sysfs"

# --- the thread checks again: the policy drains the NIC (a drain acts on
# no device) and its cycle is refused before the program
put "$MNT/auto_recover" 1
quarantine "${NICVFS[0]}"
wait_state "$NIC" failed
assert_match "$(tail -n 1 "$MNT/gpus/$NIC/history")" \
	"recover-failed by=- why=not cycled: not an NVIDIA GPU: its sysfs vendor is not 0x10de" "the NIC's history"
assert_eq "$(calls)" "" "program calls after the policy's cycle of the NIC"
assert_eq "$(nic_sysfs)" "$nic_before" "the NIC's sysfs after the policy's cycle"
put "$MNT/gpus/$NIC/drain" 0

# --- the policy's drain covers every VF sysfs shows under the GPU, as an
# operator's does: LATEB was registered before its sysfs entry; it appears
# under GPU B and is claimed; the policy drains GPU B and waits for it
fake_sysfs "$LATEB"
fake_virtfns "$GPUB" "$VFB" "$LATEB"
attacker touch "$MNT/$LATEB/assignments/vm-lateb" # its stored parent is still empty
quarantine "$VFB"
wait_state "$GPUB" draining
assert_cat "$MNT/$LATEB/parent" "$GPUB"
! placeable "$LATEB" || fail "$LATEB of a drained GPU is allocatable"
assert_eq "$(calls)" "" "program calls while a VF of GPU B is claimed"
rm "$MNT/$LATEB/assignments/vm-lateb"
wait_state "$GPUB" serving
assert_eq "$(calls)" "$GPUB numvfs=2 vfs=$VFB $LATEB" "the policy's cycle of GPU B"
rm "$T/calls"

# --- ... and the thread checks again before the program: LATEB2 appears
# under GPU B while the policy's drain waits for a VM (VFB's), and is
# claimed (its stored parent still empty); once VFB's VM leaves, the cycle
# is refused for LATEB2's claim
attacker touch "$MNT/$VFB/assignments/vm-b"
put "$MNT/$VFB/report" "failed q3-vfb 2026-11-29T08:00:00Z NVRM: RmInitAdapter failed!"
put "$MNT/$VFB/report" "failed q4-vfb 2026-11-29T08:01:00Z NVRM: RmInitAdapter failed!"
wait_state "$GPUB" draining
fake_sysfs "$LATEB2"
fake_virtfns "$GPUB" "$VFB" "$LATEB" "$LATEB2"
attacker touch "$MNT/$LATEB2/assignments/vm-lateb2"
attacker rm "$MNT/$VFB/assignments/vm-b"
wait_state "$GPUB" failed
assert_match "$(tail -n 1 "$MNT/gpus/$GPUB/history")" \
	"recover-failed by=- why=not cycled: VF $LATEB2 has a claim or a reservation" "GPU B's history"
assert_eq "$(calls)" "" "program calls while a VF of GPU B is claimed"
[[ -e $MNT/$LATEB2/assignments/vm-lateb2 ]] || fail "the claim is gone"
rm "$MNT/$LATEB2/assignments/vm-lateb2"
put "$MNT/auto_recover" off

# --- a drain covers every VF sysfs shows under the GPU
fake_sysfs "$LATE" "$SPARE" "$UNREG" "$NEVER"
fake_virtfns "$GPU" "${VFS[@]}" "$LATE" "$SPARE" "$UNREG" "$NEVER"
attacker touch "$MNT/$LATE/assignments/vm-late" # its stored parent is still empty
placeable "$SPARE" || fail "$SPARE is not allocatable before the drain"
aput "$MNT/gpus/$GPU/drain" 1
assert_cat "$MNT/gpus/$GPU/state" draining # LATE's claim lives on
assert_cat "$MNT/$LATE/parent" "$GPU"
assert_cat "$MNT/$SPARE/parent" "$GPU"
for vf in "${VFS[@]}" "$LATE" "$SPARE" "$UNREG" "$NEVER"; do
	! placeable "$vf" || fail "$vf of a drained GPU is allocatable"
done
expect_err "$EBUSY" aput "$MNT/gpus/$GPU/recover" cycle
attacker mkdir "$MNT/$UNREG" # registered now: the drained GPU's, never placed
! placeable "$UNREG" || fail "$UNREG of a drained GPU is allocatable"
expect_err "$EBUSY" attacker touch "$MNT/$UNREG/assignments/vm-unreg"
expect_err "$EBUSY" attacker touch "$MNT/$SPARE/assignments/vm-spare"
assert_eq "$(calls)" "" "program calls while a VF of the GPU is claimed"

# --- the claim ends: the cycle runs for exactly the GPU's virtfn VFs
attacker rm "$MNT/$LATE/assignments/vm-late"
assert_cat "$MNT/gpus/$GPU/state" drained
aput "$MNT/gpus/$GPU/recover" cycle
wait_state "$GPU" serving
assert_eq "$(calls)" "$GPU numvfs=6 vfs=${VFS[*]} $LATE $SPARE $UNREG $NEVER" "the program's argument and VFs"

check_sanitizers
stop_daemon
echo "ok"
