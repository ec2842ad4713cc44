#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# libvirt-hook.sh - examples/libvirt/vfhealth-qemu-hook run as libvirt runs
# it (a cleaned environment, NAME OPERATION SUBOP EXTRA, the domain XML on
# stdin) against a real vfhealthd: prepare claims every registered VF of
# the domain (one or two, unregistered hostdevs ignored) and refuses the
# start with one line naming the VF when one is out of service or claimed by
# another instance, giving back what it claimed; started completes the
# claims with pid=, control= and agent=vsock:CID (none without a vsock
# device) in one write; release releases conditionally, twice is harmless,
# and a claim a live process holds is left alone; a stale claim of the same
# name is taken over; reconnect re-creates a lost claim; bad XML, a bad
# name, a missing or dead mount and an unavailable store refuse at prepare
# and only warn at release; the settings come from
# /etc/default/vfhealth-libvirt-hook when the environment has none.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse

hook=$source_root/examples/libvirt/vfhealth-qemu-hook
command -v python3 >/dev/null || skip "python3 not installed (the hook is a python3 script)"
mount_tmpfs "$T/db" 2m 0700     # filled later to make the store unavailable
start_daemon --no-sentinel # the sentinel would poll and release the claims made here

V1=0000:41:00.4
V2=0000:41:00.5
V3=0000:42:00.4
mkdir "$MNT/$V1" "$MNT/$V2" "$MNT/$V3"
rundir=$T/run-libvirt
statedir=$T/lib-libvirt
mkdir -p "$rundir" "$statedir"

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

# run_hook NAME OP SUBOP < XML: as libvirt runs it; its exit status in rc,
# its stderr in $T/err.
run_hook() {
	rc=0
	env -i LC_ALL=C PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/ \
		VFHEALTH_MOUNT="${HOOK_MOUNT:-$MNT}" VFHEALTH_LIBVIRT_RUNDIR="$rundir" \
		VFHEALTH_LIBVIRT_STATEDIR="$statedir" \
		"$hook" "$1" "$2" "$3" - >"$T/out" 2>"$T/err" || rc=$?
	[[ ! -s $T/out ]] || fail "the hook wrote to stdout: $(cat "$T/out")"
}
expect_rc() { # WANT WHAT
	[[ $rc == "$1" ]] || fail "$2: exit $rc, want $1 (stderr: $(cat "$T/err"))"
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

# ---- one VF, no vsock: the whole life of a domain ---------------------------------

domain_xml vm-a "" "" "$V1" >"$T/a.xml"
run_hook vm-a prepare begin <"$T/a.xml"
expect_rc 0 "prepare, one VF"
expect_eq "$(claims)" "$V1 vm-a" "claims after prepare"
claim=$MNT/$V1/assignments/vm-a
expect_eq "$(claim_key "$claim" pid)" "" "pid= after prepare"
when=$(claim_key "$claim" claimed_at)
[[ -n $when ]] || fail "no claimed_at after prepare"

a_qemu vm-a 5
domain_xml vm-a 5 "" "$V1" >"$T/a-live.xml"
run_hook vm-a started begin <"$T/a-live.xml"
expect_rc 0 "started, one VF"
expect_eq "$(claim_key "$claim" pid)" "$qemu_pid" "pid= after started"
expect_eq "$(claim_key "$claim" control)" "$statedir/domain-5-vm-a/monitor.sock" "control= after started"
expect_eq "$(claim_key "$claim" agent)" "" "agent= without a vsock device"
expect_eq "$(claim_key "$claim" claimed_at)" "$when" "claimed_at after started"

# Other operations leave the claim alone.
for op in "stopped end" "migrate begin" "restore begin" "attach begin"; do
	# shellcheck disable=SC2086 # OP SUBOP
	run_hook vm-a $op <"$T/a-live.xml"
	expect_rc 0 "$op"
done
expect_eq "$(claims)" "$V1 vm-a" "claims after other operations"

# release while QEMU still runs: left alone (a live process holds it).
run_hook vm-a release end <"$T/a-live.xml"
expect_rc 0 "release with QEMU alive"
grep -q "left alone" "$T/err" || fail "no warning for a claim held by a live process: $(cat "$T/err")"
expect_eq "$(claims)" "$V1 vm-a" "claims after release with QEMU alive"

kill "$qemu_pid"
wait_until 5 process_gone "$qemu_pid" || fail "the stand-in QEMU did not exit"
wait "$qemu_pid" 2>/dev/null || true
rm -f "$rundir/vm-a.pid"
run_hook vm-a release end <"$T/a-live.xml"
expect_rc 0 "release"
expect_eq "$(claims)" "" "claims after release"
expect_grep "^$when claim vm-a released=.* ended=released-if " "$(cat "$MNT/$V1/history")" "history of the release"
run_hook vm-a release end <"$T/a-live.xml"
expect_rc 0 "a repeated release"
[[ ! -s $T/err ]] || fail "a repeated release said: $(cat "$T/err")"

# ---- two VFs and a vsock device -----------------------------------------------

domain_xml vm-b "" "" "$V1" "$V2" >"$T/b.xml"
run_hook vm-b prepare begin <"$T/b.xml"
expect_rc 0 "prepare, two VFs"
expect_eq "$(claims)" "$V1 vm-b"$'\n'"$V2 vm-b" "claims after prepare of two"
a_qemu vm-b 7
domain_xml vm-b 7 42 "$V1" "$V2" >"$T/b-live.xml"
run_hook vm-b started begin <"$T/b-live.xml"
expect_rc 0 "started, two VFs with vsock"
for vf in "$V1" "$V2"; do
	c=$MNT/$vf/assignments/vm-b
	expect_eq "$(claim_key "$c" agent)" "vsock:42:2222" "agent= of $vf"
	expect_eq "$(claim_key "$c" pid)" "$qemu_pid" "pid= of $vf"
	expect_eq "$(claim_key "$c" control)" "$statedir/domain-7-vm-b/monitor.sock" "control= of $vf"
done
kill "$qemu_pid"
wait "$qemu_pid" 2>/dev/null || true
run_hook vm-b release end <"$T/b-live.xml"
expect_rc 0 "release of two"
expect_eq "$(claims)" "" "claims after release of two"

# ---- refusals at prepare: nothing claimed stays ---------------------------------

# The second VF held by the operator: the first one's claim is given back.
echo 1 >"$MNT/$V2/quarantined"
run_hook vm-c prepare begin < <(domain_xml vm-c "" "" "$V1" "$V2")
expect_rc 1 "prepare with a held VF"
expect_eq "$(wc -l <"$T/err")" 1 "lines on stderr for a refusal"
expect_grep "^vfhealth: domain vm-c not started: VF $V2 out of service \(held\)$" "$(cat "$T/err")" "the refusal"
expect_eq "$(claims)" "" "claims after a refused prepare"
expect_grep " claim vm-c released=" "$(cat "$MNT/$V1/history")" "the first VF's claim given back"
echo 0 >"$MNT/$V2/quarantined"

# Claimed by another instance.
: >"$MNT/$V2/assignments/other-vm"
run_hook vm-c prepare begin < <(domain_xml vm-c "" "" "$V1" "$V2")
expect_rc 1 "prepare with a VF claimed by another instance"
expect_grep "^vfhealth: domain vm-c not started: VF $V2 claimed by other-vm$" "$(cat "$T/err")" "the refusal"
expect_eq "$(claims)" "$V2 other-vm" "claims after a refused prepare"
rm "$MNT/$V2/assignments/other-vm"

# A claim of the same name a live process holds (not this domain's: libvirt
# runs no prepare for a running domain) refuses; a stale one is taken over.
printf 'pid=%s\n' "$$" >"$T/attrs"
: >"$MNT/$V1/assignments/vm-d"
cat "$T/attrs" >"$MNT/$V1/assignments/vm-d"
run_hook vm-d prepare begin < <(domain_xml vm-d "" "" "$V1")
expect_rc 1 "prepare with a live claim of the same name"
expect_grep "VF $V1 is claimed as vm-d by running pid $$" "$(cat "$T/err")" "the refusal"
run_hook vm-d release end < <(domain_xml vm-d "" "" "$V1")
expect_eq "$(claims)" "$V1 vm-d" "a live claim after the release that follows a refused prepare"
rm "$MNT/$V1/assignments/vm-d"
: >"$MNT/$V1/assignments/vm-d"
stale=$(claim_key "$MNT/$V1/assignments/vm-d" claimed_at)
run_hook vm-d prepare begin < <(domain_xml vm-d "" "" "$V1")
expect_rc 0 "prepare over a stale claim of the same name"
fresh=$(claim_key "$MNT/$V1/assignments/vm-d" claimed_at)
[[ -n $fresh && $fresh != "$stale" ]] || fail "the stale claim was not replaced ($stale -> $fresh)"
run_hook vm-d release end < <(domain_xml vm-d "" "" "$V1")
expect_eq "$(claims)" "" "claims after vm-d"

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
expect_eq "$(claims)" "" "claims after bad XML"

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

# ---- started without the claim; reconnect re-creates it ---------------------

a_qemu vm-r 9
run_hook vm-r started begin < <(domain_xml vm-r 9 "" "$V3")
expect_rc 1 "started without a claim"
expect_grep "VF $V3: the claim made at prepare is gone" "$(cat "$T/err")" "the refusal"
run_hook vm-r reconnect begin < <(domain_xml vm-r 9 11 "$V3")
expect_rc 0 "reconnect"
expect_eq "$(claims)" "$V3 vm-r" "claims after reconnect"
expect_eq "$(claim_key "$MNT/$V3/assignments/vm-r" pid)" "$qemu_pid" "pid= after reconnect"
expect_eq "$(claim_key "$MNT/$V3/assignments/vm-r" agent)" "vsock:11:2222" "agent= after reconnect"
run_hook vm-r reconnect begin < <(domain_xml vm-r 9 11 "$V3")
expect_rc 0 "a second reconnect"
expect_eq "$(claims)" "$V3 vm-r" "claims after a second reconnect"
kill "$qemu_pid"
wait "$qemu_pid" 2>/dev/null || true
run_hook vm-r release end < <(domain_xml vm-r 9 11 "$V3")
expect_eq "$(claims)" "" "claims after vm-r"

# ---- the settings file, when libvirt's cleaned environment has none ----------

cat >"$T/default" <<CONF
# vfhealth-libvirt-hook settings
VFHEALTH_MOUNT="$MNT"
VFHEALTH_LIBVIRT_RUNDIR=$rundir
CONF
rc=0
domain_xml vm-i "" "" "$V1" >"$T/i.xml"
# shellcheck disable=SC2016 # the inner shell expands them
unshare -m sh -c 'mount -t tmpfs cfg /etc/default && cp "$1" /etc/default/vfhealth-libvirt-hook &&
	exec env -i LC_ALL=C PATH=/usr/bin:/bin HOME=/ "$2" vm-i prepare begin - <"$3"' \
	sh "$T/default" "$hook" "$T/i.xml" 2>"$T/err" || rc=$?
expect_rc 0 "prepare with the settings file"
expect_eq "$(claims)" "$V1 vm-i" "claims made through the settings file"
run_hook vm-i release end <"$T/i.xml"

# ---- the store unavailable: refuse at prepare, warn at release -------------------

: >"$MNT/$V3/assignments/vm-j"
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
