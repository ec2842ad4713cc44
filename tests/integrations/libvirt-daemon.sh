#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# libvirt-daemon.sh - the hook under a real libvirtd (Debian's
# libvirt-daemon-system), installed in /etc/libvirt/hooks/qemu.d/ with its
# settings in /etc/default/vfhealth-libvirt-hook, as an operator installs it.
# A TCG domain whose PCI hostdev is a registered VF: `virsh start` is refused
# with the hook's message while the VF is held or claimed by another
# instance, and leaves no claim; when the VF is in service, libvirt fails
# later (the PCI device does not exist here) and the claim made at prepare
# is released by the hook at release (the VF's history shows both).  Another
# manager's claim of the domain's name, with only control= and a process
# listening on it, refuses the start and outlives libvirt's cleanup.  A
# domain whose VF is an <interface type='hostdev'> is refused and claimed
# alike; one on a network that is a hostdev pool is refused at prepare
# (libvirt picks its VF later).  libvirtd SIGKILLed between prepare and started (held there by a
# second hook) leaves a claim that names it, which the sentinel's reconcile
# releases as its VMM's.
#
# Everything runs in private mount and network namespaces: tmpfs over
# libvirt's directories, the hook directory and /etc/default, so the host's
# libvirt (and /run/vfhealth) is never touched; libvirtd is started here and
# stopped by its pid.  Skips (77) only where libvirtd cannot run at all.
set -euo pipefail

if [[ -z ${VFHEALTH_LIBVIRT_NS:-} ]]; then
	[[ $(id -u) -eq 0 ]] || { echo "1..0 # SKIP libvirtd's system instance needs root"; exit 0; }
	for p in /usr/sbin/libvirtd virsh unshare qemu-system-x86_64 python3; do
		command -v "$p" >/dev/null ||
			{ echo "1..0 # SKIP $p not installed (Debian: libvirt-daemon-system libvirt-clients qemu-system-x86 python3)"; exit 0; }
	done
	unshare -m -n true 2>/dev/null ||
		{ echo "1..0 # SKIP cannot make private mount and network namespaces here"; exit 0; }
	VFHEALTH_LIBVIRT_NS=1 exec unshare -m -n --propagation private bash "$0" "$@"
fi

. "$(dirname -- "$0")/lib.sh"
require_fuse
hook=$source_root/examples/libvirt/vfhealth-qemu-hook

for d in /etc/libvirt/hooks /etc/libvirt/qemu /run/libvirt /var/lib/libvirt /var/log/libvirt \
	 /var/cache/libvirt /etc/default /run/vfhealth-vmm; do
	mount_tmpfs "$d" 64m
done
mkdir -p /etc/libvirt/hooks/qemu.d /var/log/libvirt/qemu
install -m 755 "$hook" /etc/libvirt/hooks/qemu.d/vfhealth-qemu-hook
printf 'VFHEALTH_MOUNT=%s\nVFHEALTH_LIBVIRT_HOOK_STATE=%s\n' "$MNT" "$T/hook-state" \
	>/etc/default/vfhealth-libvirt-hook

# QEMU as root, without cgroups, security drivers or virtlogd: nothing
# outside the namespaces' tmpfs is written.
cat >"$T/qemu.conf" <<'EOF'
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
stdio_handler = "file"
EOF
mount --bind "$T/qemu.conf" /etc/libvirt/qemu.conf
EXTRA_MOUNTS+=(/etc/libvirt/qemu.conf)
cat >"$T/libvirtd.conf" <<EOF
log_outputs = "3:file:$T/libvirtd.log"
EOF

SOCKET_DIRS=() # the built-in ones: libvirt's directories among them
start_daemon --no-sentinel # the sentinel would poll and release the claims made here
vf=0000:41:00.4
mkdir "$MNT/$vf"

/usr/sbin/libvirtd --config "$T/libvirtd.conf" --pid-file "$T/libvirtd.pid" >"$T/libvirtd.out" 2>&1 &
libvirtd_pid=$!
BG_PIDS+=("$libvirtd_pid")
export LIBVIRT_DEFAULT_URI=qemu:///system
libvirtd_ready() {
	process_running "$libvirtd_pid" || {
		skip "libvirtd cannot run here: $(tail -n 3 "$T/libvirtd.out" "$T/libvirtd.log" 2>/dev/null | tr '\n' ' ')"
	}
	virsh -q uri >/dev/null 2>&1
}
wait_until 60 libvirtd_ready || fail "libvirtd did not answer within 60 s"

# domain_xml NAME FILE DEVICES: a small QEMU domain NAME with DEVICES (XML
# lines) in FILE.
domain_xml() {
	cat >"$2" <<EOF
<domain type='qemu'>
  <name>$1</name>
  <memory unit='MiB'>32</memory>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <devices>
    <emulator>$(command -v qemu-system-x86_64)</emulator>
$3
  </devices>
</domain>
EOF
}

domain_xml vfh-test "$T/domain.xml" "\
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source><address domain='0x0000' bus='0x41' slot='0x00' function='0x4'/></source>
    </hostdev>"
virsh -q define "$T/domain.xml" >/dev/null || fail "virsh define failed"

# start_refused: `virsh start` fails; its output in $T/start.
start_fails() {
	echo "+ virsh start vfh-test"
	if virsh start vfh-test >"$T/start" 2>&1; then
		cat "$T/start"
		fail "virsh start succeeded"
	fi
	cat "$T/start"
	[[ $(virsh domstate vfh-test) == "shut off" ]] || fail "vfh-test is $(virsh domstate vfh-test)"
}

# Held by the operator: refused with the hook's message, nothing claimed.
echo 1 >"$MNT/$vf/quarantined"
start_fails
grep -qF "vfhealth: domain vfh-test not started: VF $vf out of service (held)" "$T/start" ||
	fail "virsh start did not print the hook's refusal"
[[ -z $(cat "$MNT/claims") ]] || fail "a claim after the refused start: $(cat "$MNT/claims")"
grep -q ' claim vfh-test ' "$MNT/$vf/history" && fail "the refused start left a claim in history"
echo 0 >"$MNT/$vf/quarantined"

# Claimed by another instance: refused, and the other claim stays.
: >"$MNT/$vf/assignments/other-vm"
start_fails
grep -qF "vfhealth: domain vfh-test not started: VF $vf claimed by other-vm" "$T/start" ||
	fail "virsh start did not print the hook's refusal"
[[ $(cat "$MNT/claims") == "$vf other-vm" ]] || fail "claims after the refused start: $(cat "$MNT/claims")"
rm "$MNT/$vf/assignments/other-vm"

# In service: the hook claims at prepare, libvirt fails to find the PCI
# device, and the hook releases the claim at release.
start_fails
grep -q "vfhealth:" "$T/start" && fail "the hook refused a VF in service"
grep -qi "$vf\|0000:41:00\|pci" "$T/start" || fail "virsh start failed for another reason than the missing device"
[[ -z $(cat "$MNT/claims") ]] || fail "the claim leaked after the failed start: $(cat "$MNT/claims")"
echo "+ cat $MNT/$vf/history"
cat "$MNT/$vf/history"
grep -Eq '^[0-9T:.Z-]+ claim vfh-test released=[0-9T:.Z-]+ ended=released-if by=0$' "$MNT/$vf/history" ||
	fail "no claim made at prepare and released by the hook in history"

# Another manager's claim of the same name, with only control= and its VM
# running (a process listening on the socket): refused, and the claim is as
# it was after libvirt's cleanup (the release hook) ran.
listen_unix /run/vfhealth-vmm/other.ctl
echo "control=/run/vfhealth-vmm/other.ctl" >"$MNT/$vf/assignments/vfh-test"
other=$(cat "$MNT/$vf/assignments/vfh-test")
before=$(cat "$MNT/$vf/history")
start_fails
grep -qF "vfhealth: domain vfh-test not started: VF $vf is claimed as vfh-test by another claimant (its control socket listens)" \
	"$T/start" || fail "virsh start did not print the hook's refusal"
[[ $(cat "$MNT/$vf/assignments/vfh-test") == "$other" ]] ||
	fail "the other manager's claim changed: $(cat "$MNT/$vf/assignments/vfh-test")"
[[ $(cat "$MNT/$vf/history") == "$before" ]] || fail "the refused start left history: $(cat "$MNT/$vf/history")"
stop_listener
release_claim "$MNT/$vf/assignments/vfh-test"
virsh -q undefine vfh-test >/dev/null

# <interface type='hostdev'>: refused while the VF is held, claimed (and
# released after the failed start) while it is in service.
domain_xml vfh-iface "$T/iface.xml" "\
    <interface type='hostdev' managed='yes'>
      <mac address='52:54:00:6d:90:02'/>
      <source><address type='pci' domain='0x0000' bus='0x41' slot='0x00' function='0x4'/></source>
    </interface>"
virsh -q define "$T/iface.xml" >/dev/null || fail "virsh define of vfh-iface failed"
echo 1 >"$MNT/$vf/quarantined"
echo "+ virsh start vfh-iface"
virsh start vfh-iface >"$T/start" 2>&1 && fail "virsh start vfh-iface succeeded on a held VF"
cat "$T/start"
grep -qF "vfhealth: domain vfh-iface not started: VF $vf out of service (held)" "$T/start" ||
	fail "virsh start vfh-iface did not print the hook's refusal"
echo 0 >"$MNT/$vf/quarantined"
virsh start vfh-iface >"$T/start" 2>&1 && fail "virsh start vfh-iface succeeded without the device"
cat "$T/start"
grep -q "vfhealth:" "$T/start" && fail "the hook refused vfh-iface on a VF in service"
grep -Eq '^[0-9T:.Z-]+ claim vfh-iface released=[0-9T:.Z-]+ ended=released-if by=0$' "$MNT/$vf/history" ||
	fail "no claim of vfh-iface made at prepare and released by the hook"
[[ -z $(cat "$MNT/claims") ]] || fail "claims after vfh-iface: $(cat "$MNT/claims")"
virsh -q undefine vfh-iface >/dev/null

# <interface type='network'> on a hostdev pool: libvirt picks the VF after
# prepare, so the start is refused at prepare, naming the network.
cat >"$T/pool.xml" <<EOF
<network>
  <name>vfh-pool</name>
  <forward mode='hostdev' managed='yes'>
    <address type='pci' domain='0x0000' bus='0x41' slot='0x00' function='0x4'/>
  </forward>
</network>
EOF
# libvirt checks in sysfs that a pool's devices are VFs: a VF of its own,
# in this namespace only, while it defines and starts the network.
mount_tmpfs /sys/bus/pci/devices 1m
mkdir /sys/bus/pci/devices/0000:41:00.4 /sys/bus/pci/devices/0000:41:00.0
ln -s ../0000:41:00.0 /sys/bus/pci/devices/0000:41:00.4/physfn
virsh -q net-define "$T/pool.xml" >"$T/net.out" 2>&1 || fail "virsh net-define failed: $(cat "$T/net.out")"
virsh -q net-start vfh-pool >"$T/net.out" 2>&1 || fail "virsh net-start failed: $(cat "$T/net.out")"
umount /sys/bus/pci/devices
domain_xml vfh-pooled "$T/pooled.xml" "\
    <interface type='network'><source network='vfh-pool'/></interface>"
virsh -q define "$T/pooled.xml" >/dev/null || fail "virsh define of vfh-pooled failed"
echo "+ virsh start vfh-pooled"
virsh start vfh-pooled >"$T/start" 2>&1 && fail "virsh start vfh-pooled succeeded"
cat "$T/start"
grep -qF "vfhealth: domain vfh-pooled not started: network vfh-pool is a hostdev pool: " "$T/start" ||
	fail "virsh start vfh-pooled did not print the hook's refusal"
[[ -z $(cat "$MNT/claims") ]] || fail "claims after vfh-pooled: $(cat "$MNT/claims")"
virsh -q undefine vfh-pooled >/dev/null

# libvirtd SIGKILLed between prepare and started: a second hook, run after
# vfhealth's, says so and blocks; the claim names libvirtd, and once
# libvirtd is gone the sentinel's reconcile releases it (as a crash).
mkfifo "$T/prepared"
cat >/etc/libvirt/hooks/qemu.d/zz-hold <<EOF
#!/bin/sh
[ "\$2 \$3" = "prepare begin" ] || exit 0
echo \$\$ >"$T/prepared"
exec sleep 600
EOF
chmod 755 /etc/libvirt/hooks/qemu.d/zz-hold
virsh -q define "$T/domain.xml" >/dev/null || fail "virsh define failed"
virsh start vfh-test >"$T/start" 2>&1 &
BG_PIDS+=("$!")
read -r -t 60 hold_pid <"$T/prepared" || fail "libvirtd did not reach the second prepare hook: $(cat "$T/start")"
BG_PIDS+=("$hold_pid")
claim=$MNT/$vf/assignments/vfh-test
[[ $(claim_key "$claim" pid) == "$libvirtd_pid" ]] ||
	fail "the prepare's claim does not name libvirtd ($libvirtd_pid): $(cat "$claim")"
when=$(claim_key "$claim" claimed_at)
kill -KILL "$libvirtd_pid"
wait "$libvirtd_pid" 2>/dev/null || true
kill "$hold_pid"
"$VFHEALTH_SENTINEL" --reconcile-only --reconcile-interval 0.2 --log-target stderr "$MNT" \
	>"$T/sentinel.log" 2>&1 &
BG_PIDS+=("$!")
wait_for 30 "the claim of the dead libvirtd released" test ! -e "$claim"
echo "+ cat $MNT/$vf/history"
cat "$MNT/$vf/history"
grep -Eq "^$when claim vfh-test released=[0-9T:.Z-]+ ended=crashed by=0$" "$MNT/$vf/history" ||
	fail "the claim of the dead libvirtd was not released as a crash"
grep -qE "$SANITIZER_RE" "$DAEMON_LOG" && fail "sanitizer report"
echo "libvirt daemon OK"
