#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# libvirt-hook.sh - examples/libvirt/vfhealth-qemu-hook run as libvirt runs
# it (a cleaned environment, NAME OPERATION SUBOP EXTRA, the domain XML on
# stdin) against a real vfhealthd: prepare claims every registered VF of
# the domain (<hostdev> and <interface type='hostdev'>; unregistered ones
# ignored) with pid= of its parent (libvirtd), records each claim it made
# (VF and claimed_at) in its root-only state directory, and refuses the start
# with one line naming the VF when one is out of service or claimed by
# another instance, giving back what it claimed; a claim of the domain's name
# that the hook did not make refuses the start whatever its evidence and is
# never released or completed (another manager's, its control socket
# listening or not; one made again after the hook's was removed); one of its
# own is taken over only when its VMM is dead by the sentinel's evidence (the
# pid gone; with no pid, nothing listening on its control socket), or names
# its very parent; started completes the claims with pid=, control= and
# agent=vsock:CID in one write; release releases its own claims
# conditionally, twice is harmless, and one a live QEMU holds is left alone;
# reconnect re-creates a lost claim; a VF of an NVIDIA GPU (sysfs: its
# physfn's vendor) that is not registered refuses the start, a NIC's VF
# passes unclaimed; an <interface type='network'> on a
# hostdev pool (or a network it cannot read) refuses; bad XML, a bad name, a
# missing or dead mount and an unavailable store refuse at prepare and only
# warn at release; the settings come from /etc/default/vfhealth-libvirt-hook
# when the environment has none.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse

hook=$source_root/examples/libvirt/vfhealth-qemu-hook
require_cmd python3
mount_tmpfs "$T/db" 2m 0700     # filled later to make the store unavailable
start_daemon --no-sentinel # the sentinel would poll and release the claims made here

V1=0000:41:00.4
V2=0000:41:00.5
V3=0000:42:00.4
mkdir "$MNT/$V1" "$MNT/$V2" "$MNT/$V3"
rundir=$T/run-libvirt
statedir=$T/lib-libvirt
hookstate=$T/hook-state
netdir=$T/net
mkdir -p "$rundir" "$statedir" "$netdir"

# domain_xml NAME ID CID VF...: a domain as libvirt hands it to a hook
# (ID "" for an inactive domain, CID "" for no vsock device), with a
# <hostdev> per VF, plus an unregistered one and a guest-side address that
# must not be taken for a source.
domain_xml() {
	local name=$1 id=$2 cid=$3 vf
	shift 3
	# shellcheck disable=SC2016 # the quotes are literal, $id expands
	echo "<domain type='qemu'${id:+ id='$id'}>"
	echo "  <name>$name</name>"
	echo "  <devices>"
	for vf in "$@" 0000:0b:00.1; do
		IFS=':.' read -r d b s f <<<"$vf"
		echo "    <hostdev mode='subsystem' type='pci' managed='yes'>"
		echo "      <source><address domain='0x$d' bus='0x$b' slot='0x$s' function='0x$f'/></source>"
		echo "      <address type='pci' domain='0x0000' bus='0x00' slot='0x07' function='0x0'/>"
		echo "    </hostdev>"
	done
	[[ -z $cid ]] || echo "    <vsock model='virtio'><cid auto='no' address='$cid'/></vsock>"
	echo "  </devices>"
	echo "</domain>"
}

# run_hook NAME OP SUBOP < XML: as libvirt runs it (its parent, standing in
# for libvirtd, is this shell); its exit status in rc, its stderr in $T/err.
run_hook() {
	rc=0
	env -i LC_ALL=C PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/ \
		VFHEALTH_MOUNT="${HOOK_MOUNT:-$MNT}" VFHEALTH_LIBVIRT_RUNDIR="$rundir" \
		VFHEALTH_LIBVIRT_STATEDIR="$statedir" VFHEALTH_LIBVIRT_HOOK_STATE="$hookstate" \
		VFHEALTH_LIBVIRT_NETWORKDIR="$netdir" VFHEALTH_SYSFS_ROOT="$T/sys" \
		"$hook" "$1" "$2" "$3" - >"$T/out" 2>"$T/err" || rc=$?
	[[ ! -s $T/out ]] || fail "the hook wrote to stdout: $(cat "$T/out")"
}
# run_hook_gone_parent NAME OP SUBOP < XML: run_hook under a parent that
# exits right after it (a libvirtd that died since).
run_hook_gone_parent() {
	rc=0
	(
		run_hook "$@"
		exit "$rc"
	) || rc=$?
}
expect_rc() { # WANT WHAT
	[[ $rc == "$1" ]] || fail "$2: exit $rc, want $1 (stderr: $(cat "$T/err"))"
	pass "$2: exit $1"
}
claims() { cat "$MNT/claims"; }

# a_qemu NAME ID: a process standing in for QEMU, its pid file, and its
# monitor socket where libvirt puts them.
a_qemu() {
	sleep 600 &
	BG_PIDS+=("$!")
	qemu_pid=$!
	echo "$qemu_pid" >"$rundir/$1.pid"
	mkdir -p "$statedir/domain-$2-$1"
	python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' \
		"$statedir/domain-$2-$1/monitor.sock"
}
# end_qemu: the last stand-in QEMU killed and reaped.
end_qemu() {
	kill "$qemu_pid"
	wait "$qemu_pid" 2>/dev/null || true
}

# ---- one VF, no vsock: the whole life of a domain ---------------------------------

domain_xml vm-a "" "" "$V1" >"$T/a.xml"
run_hook vm-a prepare begin <"$T/a.xml"
expect_rc 0 "prepare, one VF"
assert_eq "$(claims)" "$V1 vm-a" "claims after prepare"
claim=$MNT/$V1/assignments/vm-a
# The prepare's claim names libvirtd (here this shell), so that the sentinel
# releases it if libvirtd dies before started completes it.
assert_eq "$(claim_key "$claim" pid)" "$$" "pid= after prepare"
[[ -n $(claim_key "$claim" pid_starttime) ]] || fail "no pid_starttime recorded after prepare"
when=$(claim_key "$claim" claimed_at)
[[ -n $when ]] || fail "no claimed_at after prepare"
assert_eq "$(cat "$hookstate/vm-a")" "$V1 $when" "the hook's record of its claim"
assert_eq "$(stat -c '%a %u' "$hookstate")" "700 0" "the hook's state directory"

a_qemu vm-a 5
domain_xml vm-a 5 "" "$V1" >"$T/a-live.xml"
run_hook vm-a started begin <"$T/a-live.xml"
expect_rc 0 "started, one VF"
assert_eq "$(claim_key "$claim" pid)" "$qemu_pid" "pid= after started"
assert_eq "$(claim_key "$claim" control)" "$statedir/domain-5-vm-a/monitor.sock" "control= after started"
assert_eq "$(claim_key "$claim" agent)" "" "agent= without a vsock device"
assert_eq "$(claim_key "$claim" claimed_at)" "$when" "claimed_at after started"

# Other operations leave the claim alone.
for op in "stopped end" "migrate begin" "restore begin" "attach begin"; do
	# shellcheck disable=SC2086 # OP SUBOP
	run_hook vm-a $op <"$T/a-live.xml"
	expect_rc 0 "$op"
done
assert_eq "$(claims)" "$V1 vm-a" "claims after other operations"

# release while QEMU still runs: left alone (a live process holds it).
run_hook vm-a release end <"$T/a-live.xml"
expect_rc 0 "release with QEMU alive"
grep -q "left alone" "$T/err" || fail "no warning for a claim held by a live process: $(cat "$T/err")"
assert_eq "$(claims)" "$V1 vm-a" "claims after release with QEMU alive"

kill "$qemu_pid"
wait_until 5 process_gone "$qemu_pid" || fail "the stand-in QEMU did not exit"
wait "$qemu_pid" 2>/dev/null || true
rm -f "$rundir/vm-a.pid"
run_hook vm-a release end <"$T/a-live.xml"
expect_rc 0 "release"
assert_eq "$(claims)" "" "claims after release"
expect_grep "^$when claim vm-a released=.* ended=released-if " "$(cat "$MNT/$V1/history")" "history of the release"
run_hook vm-a release end <"$T/a-live.xml"
expect_rc 0 "a repeated release"
[[ ! -s $T/err ]] || fail "a repeated release said: $(cat "$T/err")"

# ---- two VFs and a vsock device -----------------------------------------------

domain_xml vm-b "" "" "$V1" "$V2" >"$T/b.xml"
run_hook vm-b prepare begin <"$T/b.xml"
expect_rc 0 "prepare, two VFs"
assert_eq "$(claims)" "$V1 vm-b"$'\n'"$V2 vm-b" "claims after prepare of two"
a_qemu vm-b 7
domain_xml vm-b 7 42 "$V1" "$V2" >"$T/b-live.xml"
run_hook vm-b started begin <"$T/b-live.xml"
expect_rc 0 "started, two VFs with vsock"
for vf in "$V1" "$V2"; do
	c=$MNT/$vf/assignments/vm-b
	assert_eq "$(claim_key "$c" agent)" "vsock:42:2222" "agent= of $vf"
	assert_eq "$(claim_key "$c" pid)" "$qemu_pid" "pid= of $vf"
	assert_eq "$(claim_key "$c" control)" "$statedir/domain-7-vm-b/monitor.sock" "control= of $vf"
done
end_qemu
run_hook vm-b release end <"$T/b-live.xml"
expect_rc 0 "release of two"
assert_eq "$(claims)" "" "claims after release of two"

# ---- refusals at prepare: nothing claimed stays ---------------------------------

# The second VF held by the operator: the first one's claim is given back.
echo 1 >"$MNT/$V2/quarantined"
run_hook vm-c prepare begin < <(domain_xml vm-c "" "" "$V1" "$V2")
expect_rc 1 "prepare with a held VF"
assert_eq "$(wc -l <"$T/err")" 1 "lines on stderr for a refusal"
expect_grep "^vfhealth: domain vm-c not started: VF $V2 out of service \(held\)$" "$(cat "$T/err")" "the refusal"
assert_eq "$(claims)" "" "claims after a refused prepare"
expect_grep " claim vm-c released=" "$(cat "$MNT/$V1/history")" "the first VF's claim given back"
echo 0 >"$MNT/$V2/quarantined"

# Claimed by another instance.
: >"$MNT/$V2/assignments/other-vm"
run_hook vm-c prepare begin < <(domain_xml vm-c "" "" "$V1" "$V2")
expect_rc 1 "prepare with a VF claimed by another instance"
expect_grep "^vfhealth: domain vm-c not started: VF $V2 claimed by other-vm$" "$(cat "$T/err")" "the refusal"
assert_eq "$(claims)" "$V2 other-vm" "claims after a refused prepare"
rm "$MNT/$V2/assignments/other-vm"

# ---- a claim of the domain's name the hook did not make -------------------------

# Another manager's, with only control= and its socket listening (the VM
# runs): refused, and libvirt's cleanup (release) leaves it untouched.
listen_unix "$T/other.ctl"
echo "control=$T/other.ctl" >"$MNT/$V1/assignments/vm-d"
other=$(cat "$MNT/$V1/assignments/vm-d")
domain_xml vm-d "" "" "$V1" >"$T/d.xml"
run_hook vm-d prepare begin <"$T/d.xml"
expect_rc 1 "prepare over another manager's live claim of the same name"
expect_grep "^vfhealth: domain vm-d not started: VF $V1 is claimed as vm-d by another claimant \(its control socket listens\)$" \
	"$(cat "$T/err")" "the refusal"
run_hook vm-d release end <"$T/d.xml"
expect_rc 0 "release after the refused prepare"
assert_eq "$(cat "$MNT/$V1/assignments/vm-d")" "$other" "the other manager's claim after the refused start"
# Its VMM dead (nothing listens on the socket file it left): still not the
# hook's to take over or release (the sentinel's, by its evidence).
stop_listener
test -S "$T/other.ctl" || fail "the killed listener's socket file is gone"
run_hook vm-d prepare begin <"$T/d.xml"
expect_rc 1 "prepare over another manager's dead claim of the same name"
expect_grep "VF $V1 is claimed as vm-d by another claimant \(nothing listens on its control socket\)$" \
	"$(cat "$T/err")" "the refusal"
run_hook vm-d release end <"$T/d.xml"
assert_eq "$(cat "$MNT/$V1/assignments/vm-d")" "$other" "the other manager's dead claim after release"
release_claim "$MNT/$V1/assignments/vm-d"

# The hook's own claim removed and the name claimed again by someone else
# between prepare and release (a failed start): not completed, not released.
run_hook vm-d prepare begin <"$T/d.xml"
expect_rc 0 "prepare of vm-d"
release_claim "$MNT/$V1/assignments/vm-d"
listen_unix "$T/other2.ctl"
echo "control=$T/other2.ctl" >"$MNT/$V1/assignments/vm-d"
other=$(cat "$MNT/$V1/assignments/vm-d")
a_qemu vm-d 4
run_hook vm-d started begin < <(domain_xml vm-d 4 "" "$V1")
expect_rc 1 "started over a claim made again by another claimant"
expect_grep "VF $V1: the claim of vm-d is not the one made at prepare" "$(cat "$T/err")" "the refusal"
end_qemu
run_hook vm-d release end <"$T/d.xml"
expect_rc 0 "release after the failed start"
assert_eq "$(cat "$MNT/$V1/assignments/vm-d")" "$other" "the other claimant's claim after the failed start"
stop_listener
release_claim "$MNT/$V1/assignments/vm-d"

# ---- a claim of the hook's own left by a start that never completed ----------

# Its VMM alive (pid= rewritten away by someone, its control socket
# listening): refused, kept; nothing listening: taken over.
run_hook vm-d prepare begin <"$T/d.xml"
expect_rc 0 "prepare of vm-d"
listen_unix "$T/vm-d.ctl"
echo "pid=
control=$T/vm-d.ctl" >"$MNT/$V1/assignments/vm-d"
mine=$(claim_key "$MNT/$V1/assignments/vm-d" claimed_at)
run_hook vm-d prepare begin <"$T/d.xml"
expect_rc 1 "prepare over its own claim whose control socket listens"
expect_grep "^vfhealth: domain vm-d not started: VF $V1 is still claimed as vm-d \(its control socket listens\)$" \
	"$(cat "$T/err")" "the refusal"
assert_eq "$(claim_key "$MNT/$V1/assignments/vm-d" claimed_at)" "$mine" "its own live claim after a refused prepare"
stop_listener
run_hook vm-d prepare begin <"$T/d.xml"
expect_rc 0 "prepare over its own claim whose control socket nobody listens on"
fresh=$(claim_key "$MNT/$V1/assignments/vm-d" claimed_at)
[[ -n $fresh && $fresh != "$mine" ]] || fail "its own dead claim was not taken over ($mine -> $fresh)"
expect_grep "^$mine claim vm-d released=.* ended=released-if " "$(cat "$MNT/$V1/history")" "the dead claim released"

# Its QEMU running (started completed it): refused; the QEMU gone: taken over.
a_qemu vm-d 6
run_hook vm-d started begin < <(domain_xml vm-d 6 "" "$V1")
expect_rc 0 "started of vm-d"
mine=$fresh
run_hook vm-d prepare begin <"$T/d.xml"
expect_rc 1 "prepare over its own claim whose QEMU runs"
expect_grep "VF $V1 is still claimed as vm-d \(pid $qemu_pid runs\)$" "$(cat "$T/err")" "the refusal"
end_qemu
run_hook vm-d prepare begin <"$T/d.xml"
expect_rc 0 "prepare over its own claim whose QEMU exited"
[[ $(claim_key "$MNT/$V1/assignments/vm-d" claimed_at) != "$mine" ]] || fail "not taken over"

# A prepare whose libvirtd died since: the claim names a pid that is gone,
# and the next prepare takes it over.
run_hook vm-d release end <"$T/d.xml"
assert_eq "$(claims)" "" "claims after vm-d"
run_hook_gone_parent vm-d prepare begin <"$T/d.xml"
expect_rc 0 "prepare under a parent that exits"
mine=$(claim_key "$MNT/$V1/assignments/vm-d" claimed_at)
gone=$(claim_key "$MNT/$V1/assignments/vm-d" pid)
wait_for 5 "the hook's parent gone" process_gone "$gone"
run_hook vm-d prepare begin <"$T/d.xml"
expect_rc 0 "prepare over its own claim whose libvirtd died"
[[ $(claim_key "$MNT/$V1/assignments/vm-d" claimed_at) != "$mine" ]] || fail "the claim of a dead libvirtd was not taken over"
run_hook vm-d release end <"$T/d.xml"
assert_eq "$(claims)" "" "claims after vm-d"
assert_eq "$(cat "$hookstate/vm-d")" "" "the hook's records after its release"

# A name that is no instance id; bad XML.
run_hook 'my vm' prepare begin < <(domain_xml 'my vm' "" "" "$V1")
expect_rc 1 "prepare of a domain named 'my vm'"
expect_grep "not a vfhealth instance id" "$(cat "$T/err")" "the refusal"
run_hook vm-e prepare begin <<<"<domain><devices><hostdev type='pci'>"
expect_rc 1 "prepare with bad XML"
expect_grep "^vfhealth: domain vm-e not started: bad domain XML" "$(cat "$T/err")" "the refusal"
run_hook vm-e release end <<<"<domain><devices><hostdev"
expect_rc 0 "release with bad XML"
expect_grep "bad domain XML" "$(cat "$T/err")" "the warning"
assert_eq "$(claims)" "" "claims after bad XML"

# <interface type='hostdev'> names its VF like a <hostdev>: claimed, and
# refused while out of service.
iface_xml() { # NAME VF
	local d b sl f
	IFS=':.' read -r d b sl f <<<"$2"
	echo "<domain type='qemu'><name>$1</name><devices>"
	echo "  <interface type='hostdev' managed='yes'><mac address='52:54:00:6d:90:02'/>"
	echo "    <source><address type='pci' domain='0x$d' bus='0x$b' slot='0x$sl' function='0x$f'/></source>"
	echo "  </interface>"
	echo "</devices></domain>"
}
echo 1 >"$MNT/$V2/quarantined"
run_hook vm-n prepare begin < <(iface_xml vm-n "$V2")
expect_rc 1 "prepare of an <interface type='hostdev'> on a held VF"
expect_grep "^vfhealth: domain vm-n not started: VF $V2 out of service \(held\)$" "$(cat "$T/err")" "the refusal"
echo 0 >"$MNT/$V2/quarantined"
run_hook vm-n prepare begin < <(iface_xml vm-n "$V2")
expect_rc 0 "prepare of an <interface type='hostdev'>"
assert_eq "$(claims)" "$V2 vm-n" "claims of an <interface type='hostdev'>"
run_hook vm-n release end < <(iface_xml vm-n "$V2")
assert_eq "$(claims)" "" "claims after vm-n"

# <interface type='network'>: on a hostdev pool (libvirt picks the VF after
# prepare), or a network the hook cannot read, the start is refused; on
# another network it goes ahead.
net_xml() { # NAME NETWORK
	echo "<domain type='qemu'><name>$1</name><devices>"
	echo "  <interface type='network'><source network='$2'/></interface>"
	echo "</devices></domain>"
}
cat >"$netdir/vf-pool.xml" <<EOF
<networkstatus>
  <network><name>vf-pool</name>
    <forward mode='hostdev' managed='yes'>
      <address type='pci' domain='0x0000' bus='0x41' slot='0x00' function='0x5'/>
    </forward>
  </network>
</networkstatus>
EOF
echo "<networkstatus><network><name>nat</name><forward mode='nat'/></network></networkstatus>" >"$netdir/nat.xml"
run_hook vm-p prepare begin < <(net_xml vm-p vf-pool)
expect_rc 1 "prepare on a hostdev pool"
assert_eq "$(wc -l <"$T/err")" 1 "lines on stderr for a refusal"
expect_grep "^vfhealth: domain vm-p not started: network vf-pool is a hostdev pool: " "$(cat "$T/err")" "the refusal"
run_hook vm-p prepare begin < <(net_xml vm-p absent)
expect_rc 1 "prepare on a network the hook cannot read"
expect_grep "^vfhealth: domain vm-p not started: network absent: cannot tell whether it is a hostdev pool " \
	"$(cat "$T/err")" "the refusal"
run_hook vm-p prepare begin < <(net_xml vm-p nat)
expect_rc 0 "prepare on a NAT network"
assert_eq "$(claims)" "" "claims after the network interfaces"

# Only unregistered hostdevs, or none: nothing to claim, nothing refused.
run_hook vm-f prepare begin < <(domain_xml vm-f "" "")
expect_rc 0 "prepare with an unregistered hostdev only"
HOOK_MOUNT=$T/no-mount run_hook vm-g prepare begin <<<"<domain type='qemu'><name>vm-g</name><devices/></domain>"
expect_rc 0 "prepare of a domain without hostdevs, no mount"

# No mount: refuse at prepare (its VFs' state is unknown), warn at release.
HOOK_MOUNT=$T/no-mount run_hook vm-h prepare begin < <(domain_xml vm-h "" "" "$V1")
expect_rc 1 "prepare without a mount"
expect_grep "^vfhealth: domain vm-h not started: vfhealth mount $T/no-mount: No such file or directory$" \
	"$(cat "$T/err")" "the refusal"
HOOK_MOUNT=$T/no-mount run_hook vm-h release end < <(domain_xml vm-h "" "" "$V1")
expect_rc 0 "release without a mount"
[[ -s $T/err ]] || fail "no warning at release without a mount"

# started without QEMU's pid file: refused (the claim would go on naming
# libvirtd, and the sentinel would release it while the VM runs once
# libvirtd restarts).
run_hook vm-q prepare begin < <(domain_xml vm-q "" "" "$V3")
expect_rc 0 "prepare of vm-q"
run_hook vm-q started begin < <(domain_xml vm-q 12 "" "$V3")
expect_rc 1 "started without a pid file"
expect_grep "^vfhealth: domain vm-q not started: no QEMU pid file: " "$(cat "$T/err")" "the refusal"
assert_eq "$(claim_key "$MNT/$V3/assignments/vm-q" pid)" "$$" "pid= after a refused started"
run_hook vm-q release end < <(domain_xml vm-q 12 "" "$V3")
assert_eq "$(claims)" "" "claims after vm-q"

# ---- started without the claim; reconnect re-creates it ---------------------

a_qemu vm-r 9
run_hook vm-r started begin < <(domain_xml vm-r 9 "" "$V3")
expect_rc 1 "started without a claim"
expect_grep "VF $V3: the claim made at prepare is gone" "$(cat "$T/err")" "the refusal"
run_hook vm-r reconnect begin < <(domain_xml vm-r 9 11 "$V3")
expect_rc 0 "reconnect"
assert_eq "$(claims)" "$V3 vm-r" "claims after reconnect"
assert_eq "$(claim_key "$MNT/$V3/assignments/vm-r" pid)" "$qemu_pid" "pid= after reconnect"
assert_eq "$(claim_key "$MNT/$V3/assignments/vm-r" agent)" "vsock:11:2222" "agent= after reconnect"
run_hook vm-r reconnect begin < <(domain_xml vm-r 9 11 "$V3")
expect_rc 0 "a second reconnect"
assert_eq "$(claims)" "$V3 vm-r" "claims after a second reconnect"
end_qemu
run_hook vm-r release end < <(domain_xml vm-r 9 11 "$V3")
assert_eq "$(claims)" "" "claims after vm-r"

# ---- the settings file, when libvirt's cleaned environment has none ----------

cat >"$T/default" <<CONF
# vfhealth-libvirt-hook settings
VFHEALTH_MOUNT="$MNT"
VFHEALTH_LIBVIRT_RUNDIR=$rundir
VFHEALTH_LIBVIRT_HOOK_STATE=$hookstate
CONF
rc=0
domain_xml vm-i "" "" "$V1" >"$T/i.xml"
# shellcheck disable=SC2016 # the inner shell expands them
unshare -m sh -c 'mount -t tmpfs cfg /etc/default && cp "$1" /etc/default/vfhealth-libvirt-hook &&
	exec env -i LC_ALL=C PATH=/usr/bin:/bin HOME=/ "$2" vm-i prepare begin - <"$3"' \
	sh "$T/default" "$hook" "$T/i.xml" 2>"$T/err" || rc=$?
expect_rc 0 "prepare with the settings file"
assert_eq "$(claims)" "$V1 vm-i" "claims made through the settings file"
run_hook vm-i release end <"$T/i.xml"

# ---- a VF of an NVIDIA GPU vfhealthd does not know: refused ----------------------

# sysfs (VFHEALTH_SYSFS_ROOT): GPU 0000:43:00.0 (NVIDIA, SR-IOV) and NIC
# 0000:51:00.0 (Intel, SR-IOV), a VF of each, neither registered
GV=0000:43:00.1 NV=0000:51:00.1
for pf in 0000:43:00.0=0x10de 0000:51:00.0=0x8086; do
	mkdir -p "$T/sys/bus/pci/devices/${pf%=*}"
	echo "${pf#*=}" >"$T/sys/bus/pci/devices/${pf%=*}/vendor"
	echo 16 >"$T/sys/bus/pci/devices/${pf%=*}/sriov_totalvfs"
done
for vf in "$GV" "$NV"; do
	mkdir -p "$T/sys/bus/pci/devices/$vf"
	ln -s "../${vf%.*}.0" "$T/sys/bus/pci/devices/$vf/physfn"
done
before=$(claims)
run_hook vm-u prepare begin < <(domain_xml vm-u "" "" "$V2" "$GV")
expect_rc 1 "prepare with an unregistered VF of an NVIDIA GPU"
expect_grep "^vfhealth: domain vm-u not started: VF $GV of NVIDIA GPU 0000:43:00.0 is not registered with vfhealthd " \
	"$(cat "$T/err")" "the refusal"
assert_eq "$(claims)" "$before" "claims after the refusal"
# a NIC's VF is not vfhealth's: it passes, as before
run_hook vm-u prepare begin < <(domain_xml vm-u "" "" "$V2" "$NV")
expect_rc 0 "prepare with an unregistered VF of a NIC"
expect_grep "^$V2 vm-u$" "$(claims)" "the claim of the NIC's domain"
run_hook vm-u release end < <(domain_xml vm-u "" "" "$V2" "$NV")
# registered (by hand here): claimed like any other
mkdir "$MNT/$GV"
run_hook vm-u prepare begin < <(domain_xml vm-u "" "" "$GV")
expect_rc 0 "prepare once the VF is registered"
expect_grep "^$GV vm-u$" "$(claims)" "the claim of the registered VF"
run_hook vm-u release end < <(domain_xml vm-u "" "" "$GV")
assert_eq "$(claims)" "$before" "claims after the release"

# ---- the store unavailable: refuse at prepare, warn at release -------------------

run_hook vm-j prepare begin < <(domain_xml vm-j "" "" "$V3")
expect_rc 0 "prepare of vm-j"
fill_db_dir
run_hook vm-k prepare begin < <(domain_xml vm-k "" "" "$V2")
expect_rc 1 "prepare while the store is unavailable"
expect_grep "^vfhealth: domain vm-k not started: vfhealth store unavailable: " "$(cat "$T/err")" "the refusal"
run_hook vm-j release end < <(domain_xml vm-j "" "" "$V3")
expect_rc 0 "release while the store is unavailable"
expect_grep "VF $V3: claim not released: " "$(cat "$T/err")" "the warning"

# ---- a dead mount (vfhealthd killed): refuse at prepare and started ---------------

kill_daemon
run_hook vm-l prepare begin < <(domain_xml vm-l "" "" "$V2")
expect_rc 1 "prepare on a dead mount"
expect_grep "^vfhealth: domain vm-l not started: vfhealth mount $MNT: Transport endpoint is not connected$" \
	"$(cat "$T/err")" "the refusal"
run_hook vm-l started begin < <(domain_xml vm-l 3 "" "$V2")
expect_rc 1 "started on a dead mount"
run_hook vm-l release end < <(domain_xml vm-l 3 "" "$V2")
expect_rc 0 "release on a dead mount"
[[ -s $T/err ]] || fail "no warning at release on a dead mount"
echo "libvirt hook OK"
