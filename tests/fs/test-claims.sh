#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# <vf>/assignments/: claims made by creating files, their key=value content,
# and release by rm.
source "$(dirname "$0")/lib.sh"
require_fuse
# The built-in socket directories (vfhealthd(8)): the claims below name
# sockets of the usual layouts, which need not exist yet.
SOCKET_DIRS=()
start_daemon

make_vfs V W Q
ts='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{9}Z'
boot=$(</proc/sys/kernel/random/boot_id)

# Field 22 of /proc/PID/stat (fields 3.. follow the last ')' of comm).
starttime() {
	local stat
	stat=$(</proc/"$1"/stat)
	stat=${stat##*) }
	cut -d' ' -f20 <<<"$stat"
}

# --- creating a file claims the VF, stamped with claimed_at
assert_eq "$(ls "$V/assignments")" "" "no claims yet"
touch "$V/assignments/vm-1"
assert_eq "$(ls "$V/assignments")" vm-1 "ls assignments"
assert_eq "$(stat -c '%a %F' "$V/assignments/vm-1")" "664 regular empty file" "stat claim"
claim=$(cat "$V/assignments/vm-1")
assert_match "$claim" "^claimed_at=$ts"$'\nagent=\ncontrol=\npid=\npid_starttime=\nboot_id='"$boot\$" "a fresh claim"
stamped=$(sed -n 's/^claimed_at=//p' <<<"$claim")
assert_match "$(cat "$MNT/resources")" $'\nused_slots 1\n' "resources with a claim"
# Touching it again is the same claim (open + times, both accepted).
touch "$V/assignments/vm-1"
assert_eq "$(sed -n 's/^claimed_at=//p' "$V/assignments/vm-1")" "$stamped" "claimed_at after touch"

# --- one claim per VF
expect_err "$EBUSY" touch "$V/assignments/vm-2"
expect_err "$EBUSY" put "$V/assignments/vm-2" "agent=vsock:3"$'\npid='"$$"
assert_eq "$(ls "$V/assignments")" vm-1 "after refused claims"

# --- names per instance_id rules
for bad in .hidden "a:b" "a b" "$(head -c 129 /dev/zero | tr '\0' n)" "é"; do
	expect_err "$EINVAL" touch "$W/assignments/$bad"
done
assert_eq "$(ls "$W/assignments")" "" "after bad names"

# --- key=value writes, validated as a whole
putf "$V/assignments/vm-1" 'agent=vsock:3\ncontrol=/run/vfhealth-vmm/vm-1.sock\npid=1\n'
assert_cat "$V/assignments/vm-1" "claimed_at=$stamped"$'\nagent=vsock:3:2222\ncontrol=/run/vfhealth-vmm/vm-1.sock\npid=1\npid_starttime='"$(starttime 1)"$'\nboot_id='"$boot"
put "$V/assignments/vm-1" "agent=hvsock:/run/cloud-hypervisor/vm-1.vsock:1024"$'\npid='"$$"
assert_match "$(cat "$V/assignments/vm-1")" $'\nagent=hvsock:/run/cloud-hypervisor/vm-1.vsock:1024\ncontrol=/run/vfhealth-vmm/vm-1.sock\n' "hvsock agent"
put "$V/assignments/vm-1" "agent=unix:/var/lib/libvirt/qemu/agent.sock"$'\npid='"$$"
assert_match "$(cat "$V/assignments/vm-1")" $'\nagent=unix:/var/lib/libvirt/qemu/agent.sock\n' "unix agent"
before=$(cat "$V/assignments/vm-1")
long=/$(head -c 120 /dev/zero | tr '\0' c)
for bad in "agent=tcp:10.0.0.1:22" "agent=vsock:" "agent=vsock:x" "agent=unix:relative" \
	"control=run/vmm.sock" "control=$long" "pid=0" "pid=-1" "pid=abc" "pid=99999999" \
	"bogus=1" "agent" "=x" $'agent=vsock:4\nagent=vsock:5' $'agent=vsock:4\nbogus=1' \
	"claimed_at=yesterday" "claimed_at=2026-11-29T08:00:00Z"; do
	expect_err "$EINVAL" put "$V/assignments/vm-1" "$bad"
done
assert_eq "$(cat "$V/assignments/vm-1")" "$before" "claim after bad writes"
# Socket paths outside the socket directories: EACCES, nothing changed.
for bad in "agent=unix:/run/systemd/private" "agent=hvsock:/run/dbus/x.sock:22" \
	"control=/etc/shadow" "control=/var/run/libvirt/qemu/x" "control=/run/vfhealth-vmm/../x" \
	"agent=unix:/run/vfhealth-vmm/./a.sock"; do
	expect_err "$EACCES" put "$V/assignments/vm-1" "$bad"
done
assert_eq "$(cat "$V/assignments/vm-1")" "$before" "claim after writes outside the socket directories"
grep -q "control=/etc/shadow refused (outside the socket directories or through a symlink) for uid 0 pid" \
	"$DAEMON_LOG" || fail "the refusal does not name its writer"
# Writing back what was read (claimed_at unchanged) is accepted.
sh -c 'cat "$1" > "$2" && cat "$2" > "$1"' sh "$V/assignments/vm-1" "$T/claim.txt"
assert_eq "$(cat "$V/assignments/vm-1")" "$before" "claim written back"
# The pid's start time is recorded with it (a reused pid is a different VMM).
put "$V/assignments/vm-1" "pid=$$"
assert_match "$(cat "$V/assignments/vm-1")" $'\npid='"$$"$'\npid_starttime='"$(starttime $$)"$'\nboot_id='"$boot\$" "pid"
# Writers may repeat the recorded start time (a read written back), not set one.
expect_err "$EINVAL" put "$V/assignments/vm-1" "pid_starttime=1"
assert_match "$(cat "$V/assignments/vm-1")" $'\npid_starttime='"$(starttime $$)"$'\nboot_id='"$boot\$" "pid_starttime kept"
# Likewise the boot id.
expect_err "$EINVAL" put "$V/assignments/vm-1" "boot_id=00000000-0000-0000-0000-000000000000"
put "$V/assignments/vm-1" "boot_id=$boot"

# --- the creating open may name the VMM's own claimed_at with its first write
putf "$W/assignments/vm-3" 'claimed_at=2026-11-29T06:00:00.25Z\nagent=vsock:7\npid=%s\n' "$$"
assert_match "$(cat "$W/assignments/vm-3")" $'^claimed_at=2026-11-29T06:00:00.250000000Z\nagent=vsock:7:2222\ncontrol=\npid='"$$"$'\n'
expect_err "$EINVAL" put "$W/assignments/vm-3" "claimed_at=2026-11-29T06:00:01Z"
put "$W/assignments/vm-3" "claimed_at=2026-11-29T06:00:00.250Z" # the same instant

# --- a quarantined VF cannot be claimed
put "$Q/quarantined" 1
expect_err "$EBUSY" touch "$Q/assignments/vm-4"
put "$Q/quarantined" 0
touch "$Q/assignments/vm-4"

# --- release= releases; then another instance may claim
unclaim "$V/assignments/vm-1"
assert_eq "$(ls "$V/assignments")" "" "after rm"
expect_err "$ENOENT" cat "$V/assignments/vm-1"
expect_err "$ENOENT" rm "$V/assignments/vm-1"
touch "$V/assignments/vm-2"
assert_eq "$(ls "$V/assignments")" vm-2 "new claim after release"
assert_cat "$MNT/resources" $'total_slots 3\nused_slots 3\nallocatable_slots 0\nquarantined_slots 0'

# --- nothing else can be created, removed or renamed
expect_err "$EACCES" touch "$V/newfile"
expect_err "$EACCES" touch "$MNT/newfile"
expect_err "$EPERM" mkdir "$V/assignments/dir"
expect_err "$EPERM" mv "$V/assignments/vm-2" "$V/assignments/vm-5"
expect_err "$EPERM" ln -s /tmp "$V/assignments/link"
assert_eq "$(ls "$V/assignments")" vm-2 "after refused operations"

stop_daemon
echo "ok"
