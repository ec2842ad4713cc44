#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Registration from sysfs (vfhealthd --register, default sysfs), on a fake
# sysfs (--sysfs-root) with two NVIDIA GPUs with SR-IOV and a NIC (vendor
# 0x8086, SR-IOV), in a network namespace of its own, where the test sends
# the uevents the kernel would (vftool uevent) and nothing else hears them:
#   - at start every VF of every NVIDIA GPU is registered, its parent from
#     the links, one log line per GPU with the count; the NIC's VFs are
#     not; a registered VF is like a mkdir'd one (mkdir: EEXIST);
#   - an operator's sriov_numvfs change (the links change, a uevent of the
#     pci subsystem): a VF gone unclaimed is unregistered; a VF gone while
#     claimed stays registered and out of allocatable until its claim is
#     released, then is unregistered; one gone with a failure on record
#     stays, out of allocatable and refusing claims, until cleared; VFs
#     that appear are registered;
#   - a cycle run by vfhealthd (the program changes the tree: one VF more)
#     re-registers when it ends;
#   - a restart finds a gone VF's claim and record and keeps it so;
#   - --register manual registers nothing (mkdir does); a tree with no
#     NVIDIA GPU registers nothing and says so.
if [[ -z ${VFH_TEST_NETNS:-} ]]; then
	unshare --net true 2>/dev/null || {
		# before the harness: its skip, as TAP
		echo "1..0 # SKIP cannot make a network namespace (needs CAP_SYS_ADMIN)"
		exit 0
	}
	VFH_TEST_NETNS=1 exec unshare --net -- "$BASH" "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
require_fuse
mount_tmpfs "$T/db" 4m 0700

GPU=0000:41:00.0 GPUB=0000:42:00.0 NIC=0000:51:00.0
VFS=(0000:41:00.1 0000:41:00.2 0000:41:00.3 0000:41:00.4)
VFB=0000:42:00.1
NICVFS=(0000:51:00.1 0000:51:00.2)
NEW=0000:41:00.5 # brought by the cycle
fake_host

# The stand-in cycle: the GPU's VFs come back with one more, as after a
# larger sriov_numvfs.
mkdir -m 0755 "$T/bin"
cat >"$T/bin/cycle" <<EOF
#!/bin/bash
set -eu
dev=\$VFHEALTH_SYSFS_ROOT/bus/pci/devices
mkdir -p "\$dev/$NEW"
ln -sfn "../\$1" "\$dev/$NEW/physfn"
n=\$(ls -d "\$dev/\$1"/virtfn* | wc -l)
ln -s "../$NEW" "\$dev/\$1/virtfn\$n"
EOF
chmod 0755 "$T/bin/cycle"
DAEMON_ARGS+=(--recover-program "$T/bin/cycle")

registered() { [[ -d $MNT/$1 ]]; }
placeable() { grep -qx "$1" "$MNT/allocatable"; }
uevent() { "$VFTOOL" uevent "$1" "/devices/pci0000:40/$2" pci || fail "cannot send a uevent"; }
# gone VF...: the VFs leave sysfs, as `echo N > sriov_numvfs` makes them
gone() {
	local vf
	for vf in "$@"; do rm -r "${SYSFS_DEVICES:?}/$vf"; done
}

# --- at start: every VF of every NVIDIA GPU, its parent from sysfs
start_daemon
for vf in "${VFS[@]}" "$VFB"; do
	registered "$vf" || fail "$vf is not registered at start"
	placeable "$vf" || fail "$vf is not allocatable"
done
assert_cat "$MNT/${VFS[0]}/parent" "$GPU"
assert_cat "$MNT/$VFB/parent" "$GPUB"
for vf in "${NICVFS[@]}"; do
	! registered "$vf" || fail "$vf, a NIC's VF, is registered"
done
grep -q "GPU $GPU: 4 VFs registered from sysfs (4 new)" "$DAEMON_LOG" ||
	fail "no line for GPU $GPU"
grep -q "GPU $GPUB: 1 VF registered from sysfs (1 new)" "$DAEMON_LOG" ||
	fail "no line for GPU $GPUB"
expect_err "File exists" mkdir "$MNT/${VFS[0]}"

# --- a cycle vfhealthd runs: the VF it brings is registered when it ends
# (before any uevent: nothing else looks at sysfs then)
put "$MNT/gpus/$GPU/drain" 1
put "$MNT/gpus/$GPU/recover" cycle
wait_for 20 "the cycle's end" grep -q "GPU $GPU: recovered" "$DAEMON_LOG"
wait_for 20 "$NEW registered after the cycle" registered "$NEW"
assert_cat "$MNT/$NEW/parent" "$GPU"
for vf in "${VFS[@]}"; do registered "$vf" || fail "$vf lost in the cycle"; done

# --- outside vfhealthd, sriov_numvfs goes from 4 to 1: VF 1 is unclaimed,
# VF 2 claimed, VF 3 has a failure on record
touch "$MNT/${VFS[2]}/assignments/vm-held"
put "$MNT/${VFS[3]}/report" "failed vm-f 2026-11-29T07:00:00Z NVRM: RmInitAdapter failed!"
fake_virtfns "$GPU" "${VFS[0]}"
gone "${VFS[1]}" "${VFS[2]}" "${VFS[3]}" "$NEW"
uevent remove "${VFS[1]}"
wait_for 20 "${VFS[1]} unregistered" eval "! registered ${VFS[1]}"
wait_for 20 "$NEW unregistered" eval "! registered $NEW"
grep -q "VF ${VFS[1]} is gone from sysfs (GPU $GPU): unregistered" "$DAEMON_LOG" ||
	fail "the unregistration is not logged"
registered "${VFS[2]}" || fail "${VFS[2]}, gone while claimed, was unregistered"
registered "${VFS[3]}" || fail "${VFS[3]}, gone with a failure on record, was unregistered"
[[ -e $MNT/${VFS[2]}/assignments/vm-held ]] || fail "the claim is gone"
grep -q "VF ${VFS[2]} is gone from sysfs (GPU $GPU) while claimed: kept registered" \
	"$DAEMON_LOG" || fail "the kept VF is not logged"
! placeable "${VFS[3]}" || fail "${VFS[3]}, gone from sysfs, is allocatable"
expect_err "$EBUSY" touch "$MNT/${VFS[3]}/assignments/vm-late"
grep -qx "allocatable_slots 2" "$MNT/resources" || fail "resources: $(cat "$MNT/resources")"

# a restart keeps them so: what sysfs shows is looked at before READY=1
stop_daemon
start_daemon
registered "${VFS[2]}" || fail "${VFS[2]}, gone while claimed, was unregistered at a restart"
! placeable "${VFS[3]}" || fail "${VFS[3]}, gone from sysfs, is allocatable after a restart"
! placeable "${VFS[1]}" || fail "${VFS[1]}, gone from sysfs, is allocatable after a restart"

# released: unregistered
rm "$MNT/${VFS[2]}/assignments/vm-held"
wait_for 20 "${VFS[2]} unregistered once released" eval "! registered ${VFS[2]}"
# cleared: unregistered
put "$MNT/${VFS[3]}/quarantined" 0
wait_for 20 "${VFS[3]} unregistered once cleared" eval "! registered ${VFS[3]}"

# --- sriov_numvfs back to 4: they are registered again
fake_sysfs "${VFS[@]}"
fake_virtfns "$GPU" "${VFS[@]}"
uevent add "${VFS[3]}"
for vf in "${VFS[@]}"; do
	wait_for 20 "$vf registered again" registered "$vf"
	assert_cat "$MNT/$vf/parent" "$GPU"
done
placeable "${VFS[3]}" || fail "${VFS[3]}, back, is not allocatable"

check_sanitizers
stop_daemon

# --- --register manual: nothing from sysfs; mkdir registers, its parent from physfn
DB=$T/db/manual.db
start_daemon --register manual
assert_eq "$(ls "$MNT" | grep -c '^0000:')" 0 "VFs registered with --register manual"
mkdir "$MNT/${VFS[0]}"
assert_cat "$MNT/${VFS[0]}/parent" "$GPU"
stop_daemon

# --- no NVIDIA GPU under --sysfs-root: nothing registered, a notice
mkdir -p "$T/nogpu/bus/pci/devices"
DB=$T/db/nogpu.db
start_daemon --sysfs-root "$T/nogpu"
assert_eq "$(ls "$MNT" | grep -c '^0000:')" 0 "VFs registered without an NVIDIA GPU"
grep -q "no NVIDIA GPU with SR-IOV (vendor 0x10de, sriov_totalvfs) in $T/nogpu/bus/pci/devices" \
	"$DAEMON_LOG" || fail "no notice for a tree without an NVIDIA GPU"
check_sanitizers
stop_daemon
echo "ok"
