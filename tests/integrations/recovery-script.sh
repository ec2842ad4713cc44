#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# recovery-script.sh - examples/recovery/sriov-cycle.sh run as vfhealthd runs
# it (a clean environment, argv PF, stdin /dev/null, stdout and stderr
# apart) against a fake sysfs (the PF with sriov_numvfs and virtfnN links to
# its VFs), with stand-in systemctl and sriov-manage on PATH that record
# every call and act on the fake sysfs (flag files make them fail or bring
# back fewer VFs), and a stand-in kernel (inotifywait on sriov_numvfs) that
# removes and recreates the links when no sriov-manage is there.
# Success through sriov-manage and through sriov_numvfs (also with
# sriov_numvfs already 0: VFHEALTH_NUMVFS says how many); the header's
# transcripts are what it prints; only active services are stopped, and
# exactly those are started again, after the cycle, also when it fails
# (sriov-manage -d or -e failing, VFs still there after -d or not back
# within VFHEALTH_CYCLE_WAIT_S, a stop or a start failing, SIGTERM to its
# process group as at vfhealthd's deadline); SR-IOV is never enabled again
# after a failed disable; every failure is exit 1 with one stderr line; a
# refused run (no VFHEALTH_PARENT, another PF, a PF without sriov_numvfs, a
# NIC beside the GPU (vendor not 0x10de), a device without sriov_totalvfs,
# a bad PF or knob) exits 2 and touches nothing.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_cmd inotifywait:inotify-tools

prog=$source_root/examples/recovery/sriov-cycle.sh
pf=0000:41:00.0
vfs=(0000:41:00.4 0000:41:00.5)
sys=$T/sys
dev=$sys/bus/pci/devices/$pf
calls=$T/calls          # every stand-in call, one line each, in order
flags=$T/flags          # fail-d, keep-on-d, fail-e, fail-stop-UNIT, fail-start-UNIT, recreate (a count)
services=$T/services    # UNIT: "active" or "inactive"
clean_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p "$T/bin" "$T/off" "$flags" "$services"
printf '%s\n' "${vfs[@]}" >"$T/vf-list"

# ---- the stand-ins --------------------------------------------------------------

# recreate DEV N: virtfn0..N-1 and their VFs (at most the flag file's count).
cat >"$T/sysfs-lib.sh" <<'EOF2'
# shellcheck shell=bash
here=$(cd "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
remove_vfs() {
	local l
	for l in "$1"/virtfn*; do
		[[ -L $l ]] || continue
		rm -rf -- "$1/$(readlink -- "$l")"
		rm -- "$l"
	done
}
recreate_vfs() {
	local i n=$2 vf
	[[ ! -e $here/flags/recreate ]] || n=$(<"$here/flags/recreate")
	i=0
	while read -r vf && ((i < n)); do
		mkdir -p -- "$1/../$vf"
		ln -s -- "../$vf" "$1/virtfn$i"
		i=$((i + 1))
	done <"$here/vf-list"
}
EOF2
cat >"$T/bin/sriov-manage" <<'EOF2'
#!/usr/bin/env bash
# The stand-in sriov-manage: -d PF removes the VFs, -e PF recreates them.
set -euo pipefail
. "$(dirname -- "$0")/../sysfs-lib.sh"
echo "sriov-manage $*" >>"$here/calls"
dev=${VFHEALTH_SYSFS_ROOT:?}/bus/pci/devices/$2
case $1 in
-d)
	[[ ! -e $here/flags/fail-d ]] || { echo "Cannot disable VFs on $2: device is in use"; exit 1; }
	[[ ! -e $here/flags/keep-on-d ]] || exit 0
	remove_vfs "$dev"
	echo 0 >"$dev/sriov_numvfs"
	;;
-e)
	echo "Enabling VFs on $2"
	[[ ! -e $here/flags/fail-e ]] || { echo "Cannot obtain unbindLock for $2" >&2; exit 1; }
	recreate_vfs "$dev" "$(wc -l <"$here/vf-list")"
	wc -l <"$here/vf-list" >"$dev/sriov_numvfs"
	;;
esac
EOF2
cat >"$T/bin/systemctl" <<'EOF2'
#!/usr/bin/env bash
# The stand-in systemctl: a unit's state in services/UNIT.
set -euo pipefail
here=$(cd "$(dirname -- "$0")/.." && pwd)
echo "systemctl $*" >>"$here/calls"
case $1 in
is-active)
	[[ $2 == --quiet ]] || { echo "is-active without --quiet" >&2; exit 1; }
	[[ $(cat "$here/services/$3" 2>/dev/null) == active ]] || exit 3
	;;
stop)
	[[ ! -e $here/flags/fail-stop-$2 ]] || { echo "Job for $2 canceled." >&2; exit 1; }
	echo inactive >"$here/services/$2"
	;;
start)
	[[ ! -e $here/flags/fail-start-$2 ]] ||
		{ echo "Job for $2 failed because the control process exited with error code." >&2; exit 1; }
	echo active >"$here/services/$2"
	;;
*) echo "the stand-in systemctl does not know: $*" >&2; exit 1 ;;
esac
EOF2
# The stand-in kernel, when no sriov-manage is there: what is written to
# sriov_numvfs removes (0) or recreates (N) the VFs, after the write returned.
cat >"$T/kernel.sh" <<'EOF2'
#!/usr/bin/env bash
set -euo pipefail
. "$(dirname -- "$0")/sysfs-lib.sh"
dev=$1
exec 3< <(exec inotifywait -m -e close_write --format x "$dev/sriov_numvfs" 2>"$here/kernel.err")
watcher=$!
trap 'kill "$watcher" 2>/dev/null || true' EXIT
trap 'exit 0' TERM
while read -r _ <&3; do
	v=$(<"$dev/sriov_numvfs")
	echo "kernel sriov_numvfs=$v" >>"$here/calls"
	if ((v == 0)); then remove_vfs "$dev"; else recreate_vfs "$dev" "$v"; fi
done
EOF2
chmod +x "$T/bin/sriov-manage" "$T/bin/systemctl" "$T/kernel.sh"
kernel_pid=
start_kernel() {
	: >"$T/kernel.err"
	background "$T/kernel.sh" "$dev"
	kernel_pid=$!
	wait_for 10 "the stand-in kernel's watch" grep -q 'Watches established' "$T/kernel.err"
}
stop_kernel() {
	kill "$kernel_pid"
	wait "$kernel_pid" || true
}

# ---- helpers ----------------------------------------------------------------------

# reset [N]: the PF with N (default 2) VFs, sriov_numvfs N; no flag; the
# units nvidia-dcgm and nvidia-persistenced active, dcgm.service absent.
reset() {
	local n=${1:-2} i
	rm -rf -- "$sys" "${flags:?}"/* "${services:?}"/*
	mkdir -p "$dev"
	echo 0x10de >"$dev/vendor" # an NVIDIA GPU with SR-IOV
	echo 16 >"$dev/sriov_totalvfs"
	echo "$n" >"$dev/sriov_numvfs"
	for ((i = 0; i < n; i++)); do
		mkdir -p "$dev/../${vfs[i]}"
		ln -s "../${vfs[i]}" "$dev/virtfn$i"
	done
	echo active >"$services/nvidia-dcgm.service"
	echo active >"$services/nvidia-persistenced.service"
	: >"$calls"
}
with_sriov_manage() { [[ -x $T/bin/sriov-manage ]] || mv "$T/off/sriov-manage" "$T/bin/"; }
without_sriov_manage() { [[ ! -x $T/bin/sriov-manage ]] || mv "$T/bin/sriov-manage" "$T/off/"; }

# cycle [VAR=VALUE...] [-- ARG...]: the program as vfhealthd runs it (ARGs
# default to PF); its status in rc, stdout in out, stderr in err, the time
# it took in ms.
cycle() {
	local envs=() args=("$pf") start
	while (($#)); do
		if [[ $1 == -- ]]; then shift; args=("$@"); break; fi
		envs+=("$1"); shift
	done
	rc=0
	start=${EPOCHREALTIME//[.,]/}
	env -i "PATH=$T/bin:$clean_path" "VFHEALTH_PARENT=$pf" "VFHEALTH_VFS=${vfs[*]}" \
		VFHEALTH_NUMVFS=2 "VFHEALTH_SYSFS_ROOT=$sys" "${envs[@]}" \
		"$prog" "${args[@]}" </dev/null >"$T/out" 2>"$T/err" || rc=$?
	took_ms=$(((${EPOCHREALTIME//[.,]/} - start) / 1000))
	out=$(<"$T/out")
	err=$(<"$T/err")
}
expect_rc() {
	[[ $rc == "$1" ]] || fail "$2: exit $rc, want $1 (stderr: $err; stdout: $out)"
	pass "$2: exit $1"
}
expect_calls() { # WANT WHAT: the stand-ins' calls, in order
	[[ $(<"$calls") == "$1" ]] || fail "$2: the calls were
$(<"$calls")
want
$1"
	pass "$2: the calls in order"
}
# one_line PATTERN WHAT: stderr is one line, matching PATTERN (extended regex).
one_line() {
	[[ -n $err && $(wc -l <"$T/err") == 1 ]] || fail "$2: stderr is not one line: $err"
	grep -Eq -- "$1" <<<"$err" || fail "$2: stderr '$err' does not match /$1/"
}
# vfs_back: the links point at the VFs again, and those exist.
vfs_back() {
	local i links=("$dev"/virtfn*)
	[[ ${#links[@]} == "${#vfs[@]}" ]] || return 1
	for i in "${!vfs[@]}"; do
		[[ $(readlink "$dev/virtfn$i") == "../${vfs[i]}" && -d $dev/../${vfs[i]} ]] || return 1
	done
}
expect_active() { # UNIT...: each reads active
	local u
	for u in "$@"; do
		[[ $(cat "$services/$u" 2>/dev/null) == active ]] || fail "$u is $(cat "$services/$u" 2>/dev/null || echo absent), want active"
	done
	pass "active: $*"
}
# failed_cycle FLAG WHAT PATTERN CALLS [VAR=VALUE...]: from a reset, with
# $flags/FLAG set, the run exits 1 with one stderr line matching PATTERN,
# the stand-ins saw CALLS, and both units are active again.
failed_cycle() {
	local flag=$1 what=$2 pattern=$3 want=$4
	shift 4
	reset
	touch "$flags/$flag"
	cycle "$@"
	expect_rc 1 "$what"
	one_line "$pattern" "$what"
	expect_calls "$want" "$what"
	expect_active nvidia-dcgm.service nvidia-persistenced.service
}
# The calls of a run that stops both active units.
stops='systemctl is-active --quiet nvidia-dcgm.service
systemctl stop nvidia-dcgm.service
systemctl is-active --quiet dcgm.service
systemctl is-active --quiet nvidia-persistenced.service
systemctl stop nvidia-persistenced.service'
starts='systemctl start nvidia-persistenced.service
systemctl start nvidia-dcgm.service'

mv "$T/bin/sriov-manage" "$T/off/"
# The program falls back to /usr/lib/nvidia/sriov-manage: with a real one
# there (a GPU host), the sriov_numvfs cases would cycle a real GPU.
real_sriov_manage=$(PATH=$clean_path command -v sriov-manage || true)
[[ -z $real_sriov_manage && ! -e /usr/lib/nvidia/sriov-manage ]] ||
	skip "this machine has a real sriov-manage (${real_sriov_manage:-/usr/lib/nvidia/sriov-manage}): the fallback cases would reach a real GPU"
with_sriov_manage

# ---- success ----------------------------------------------------------------------

echo "== success with sriov-manage"
reset
cycle
expect_rc 0 "success"
[[ -z $err ]] || fail "success wrote to stderr: $err"
expect_calls "$stops
sriov-manage -d $pf
sriov-manage -e $pf
$starts" "success with sriov-manage"
vfs_back || fail "the VFs are not back: $(ls -l "$dev")"
expect_active nvidia-dcgm.service nvidia-persistenced.service
[[ ! -e $services/dcgm.service ]] || fail "dcgm.service was touched"
# The header's first transcript is what it prints (its times aside, and
# sriov-manage's own line, which the header says comes between).
want=$(sed -n '/^#   # env -i/,/^#   # echo/p' "$prog" | sed -n '1,/^#   # echo/p' |
	sed -n 's/^#   \(sriov-cycle: .*\)/\1/p')
got=$(grep -v ': sriov-manage: Enabling VFs on ' <<<"$out")
grep -qx "sriov-cycle: $pf: sriov-manage: Enabling VFs on $pf" <<<"$out" ||
	fail "sriov-manage's own line is not in the output: $out"
[[ $(sed -E 's/after [0-9]+\.[0-9] s$/after T s/' <<<"$got") == "$(sed -E 's/after [0-9]+\.[0-9] s$/after T s/' <<<"$want")" ]] ||
	fail "the output is not the header's transcript:
$got
want
$want"

echo "== success through sriov_numvfs (no sriov-manage), the VFs returned by the kernel after the writes"
without_sriov_manage
reset
start_kernel
cycle
stop_kernel
expect_rc 0 "success through sriov_numvfs"
[[ -z $err ]] || fail "success wrote to stderr: $err"
expect_calls "$stops
kernel sriov_numvfs=0
kernel sriov_numvfs=2
$starts" "success through sriov_numvfs"
vfs_back || fail "the VFs are not back: $(ls -l "$dev")"
[[ $(<"$dev/sriov_numvfs") == 2 ]] || fail "sriov_numvfs reads $(<"$dev/sriov_numvfs")"
expect_active nvidia-dcgm.service nvidia-persistenced.service

echo "== sriov_numvfs already 0 (a cycle stopped half way): VFHEALTH_NUMVFS says how many"
reset 0
start_kernel
cycle VFHEALTH_NUMVFS=2
stop_kernel
expect_rc 0 "sriov_numvfs 0"
expect_calls "$stops
kernel sriov_numvfs=2
$starts" "sriov_numvfs 0, VFHEALTH_NUMVFS=2"
vfs_back || fail "the VFs are not back: $(ls -l "$dev")"
with_sriov_manage

echo "== inactive services are neither stopped nor started"
reset
rm "$services"/*
echo inactive >"$services/nvidia-dcgm.service"
cycle
expect_rc 0 "no active service"
expect_calls "systemctl is-active --quiet nvidia-dcgm.service
systemctl is-active --quiet dcgm.service
systemctl is-active --quiet nvidia-persistenced.service
sriov-manage -d $pf
sriov-manage -e $pf" "no active service"
[[ $(<"$services/nvidia-dcgm.service") == inactive && ! -e $services/nvidia-persistenced.service ]] ||
	fail "an inactive service changed: $(grep . "$services"/*)"
vfs_back || fail "the VFs are not back"

# ---- failures: exit 1, one stderr line, the services started again ---------------

echo "== sriov-manage -e fails"
failed_cycle fail-e "sriov-manage -e failing" \
	"^sriov-cycle: $pf: sriov-manage -e $pf failed: Cannot obtain unbindLock for $pf; SR-IOV is off on this GPU: .*runbook\\.md#a-gpu-failed-recovery\\)\$" \
	"$stops
sriov-manage -d $pf
sriov-manage -e $pf
$starts"

echo "== sriov-manage -d fails: SR-IOV is not enabled again"
failed_cycle fail-d "sriov-manage -d failing" \
	"^sriov-cycle: $pf: sriov-manage -d $pf failed: Cannot disable VFs on $pf: device is in use; " \
	"$stops
sriov-manage -d $pf
$starts"

echo "== sriov-manage -d says yes but the VFs stay: SR-IOV is not enabled again"
failed_cycle keep-on-d "VFs left after sriov-manage -d" \
	"^sriov-cycle: $pf: 2 VFs still present 1 s after disabling SR-IOV; " \
	"$stops
sriov-manage -d $pf
$starts" VFHEALTH_CYCLE_WAIT_S=1

echo "== a VF does not come back: exit 1 once VFHEALTH_CYCLE_WAIT_S has passed"
reset
echo 1 >"$flags/recreate"
cycle VFHEALTH_CYCLE_WAIT_S=1
expect_rc 1 "a VF not back"
# The header's second transcript, on this sysfs and bound.
want=$(sed -n 's/^#   \(sriov-cycle: .*only .* of .* VFs back .*\)/\1/p' "$prog")
want=${want//\/sys\//$sys/}
want=${want/back 60 s/back 1 s}
one_line "^" "a VF not back"
[[ $err == "$want" ]] || fail "a VF not back: stderr '$err', want the header's '$want'"
((took_ms >= 1000 && took_ms < 30000)) || fail "a VF not back: it took $took_ms ms, want the 1 s bound (and well under 30 s)"
expect_calls "$stops
sriov-manage -d $pf
sriov-manage -e $pf
$starts" "a VF not back"
expect_active nvidia-dcgm.service nvidia-persistenced.service

echo "== a service does not stop: no cycle, what was stopped is started"
reset
touch "$flags/fail-stop-nvidia-persistenced.service"
cycle
expect_rc 1 "a stop failing"
one_line "^sriov-cycle: $pf: systemctl stop nvidia-persistenced.service failed: Job for nvidia-persistenced.service canceled\\.; " \
	"a stop failing"
expect_calls "$stops
$starts" "a stop failing"
expect_active nvidia-dcgm.service

echo "== a service does not start again after a good cycle: exit 1"
reset
touch "$flags/fail-start-nvidia-dcgm.service"
cycle
expect_rc 1 "a start failing"
one_line "^sriov-cycle: $pf: the VFs are back, but nvidia-dcgm.service did not start again \\(Job for nvidia-dcgm.service failed .*\\): start it with systemctl start nvidia-dcgm.service, " \
	"a start failing"
expect_calls "$stops
sriov-manage -d $pf
sriov-manage -e $pf
$starts" "a start failing"
expect_active nvidia-persistenced.service
vfs_back || fail "the VFs are not back"

echo "== SIGTERM to its process group (vfhealthd's deadline) while it waits for the VFs"
reset
echo 1 >"$flags/recreate"
rc=0
setsid env -i "PATH=$T/bin:$clean_path" "VFHEALTH_PARENT=$pf" "VFHEALTH_SYSFS_ROOT=$sys" \
	"$prog" "$pf" </dev/null >"$T/out" 2>"$T/err" &
prog_pid=$!
wait_for 10 "the program's sriov-manage -e" grep -qx "sriov-manage -e $pf" "$calls"
pgid=$(ps -o pgid= -p "$prog_pid" | tr -d ' ')
[[ $pgid == "$prog_pid" && $pgid != "$(ps -o pgid= -p $$ | tr -d ' ')" ]] ||
	fail "the program is not in a process group of its own (pgid '$pgid')"
kill -TERM -- "-$pgid"
wait "$prog_pid" || rc=$?
err=$(<"$T/err")
[[ $rc == 143 ]] || fail "SIGTERM: exit $rc, want 143 (stderr: $err)"
one_line "^sriov-cycle: $pf: terminated by SIGTERM \\(vfhealthd's --recover-timeout\\) while waiting for the VFs to come back; " "SIGTERM"
expect_calls "$stops
sriov-manage -d $pf
sriov-manage -e $pf
$starts" "SIGTERM"
expect_active nvidia-dcgm.service nvidia-persistenced.service

# ---- refusals: exit 2, nothing touched --------------------------------------------

# refused WHAT PATTERN [cycle args]: exit 2, one line, no call, sysfs as it was.
refused() {
	local what=$1 pattern=$2 before
	shift 2
	reset
	before=$(ls -l "$dev"; cat "$dev/sriov_numvfs")
	cycle "$@"
	expect_rc 2 "$what"
	one_line "$pattern" "$what"
	expect_calls "" "$what"
	[[ $(ls -l "$dev"; cat "$dev/sriov_numvfs") == "$before" ]] || fail "$what: the sysfs changed"
	[[ -z $out ]] || fail "$what: stdout '$out'"
	echo "ok   refused: $what"
}
echo "== refusals"
refused "no VFHEALTH_PARENT" "^sriov-cycle: $pf: VFHEALTH_PARENT is not set" VFHEALTH_PARENT=
refused "VFHEALTH_PARENT naming another GPU" "VFHEALTH_PARENT names '0000:42:00.0', not this GPU" VFHEALTH_PARENT=0000:42:00.0
refused "no PF argument" "^sriov-cycle: usage: " --
refused "a PF that is no PCI address" "is not a PCI address" VFHEALTH_PARENT=../../x -- ../../x
mkdir -p "$sys/bus/pci/devices/0000:42:00.0"
refused "a PF without sriov_numvfs" "^sriov-cycle: 0000:42:00.0: no $sys/bus/pci/devices/0000:42:00.0/sriov_numvfs: not an SR-IOV physical function" \
	VFHEALTH_PARENT=0000:42:00.0 -- 0000:42:00.0
refused "a bad VFHEALTH_CYCLE_WAIT_S" "VFHEALTH_CYCLE_WAIT_S must be" VFHEALTH_CYCLE_WAIT_S=0
refused "a bad VFHEALTH_NUMVFS" "VFHEALTH_NUMVFS must be a number" VFHEALTH_NUMVFS=x
# Another device's address, with SR-IOV: a NIC beside the GPU (vendor 0x8086)
# and an NVIDIA device without sriov_totalvfs: refused, neither touched.
nic=0000:51:00.0 plain=0000:52:00.0
refused_device() { # WHAT PATTERN PF: as `refused`, for PF's sysfs directory
	local what=$1 pattern=$2 other=$3 before
	reset
	mkdir -p "$sys/bus/pci/devices/$other/../0000:51:00.1"
	echo "${4:-0x8086}" >"$sys/bus/pci/devices/$other/vendor"
	[[ -n ${4:-} ]] || echo 64 >"$sys/bus/pci/devices/$other/sriov_totalvfs"
	echo 1 >"$sys/bus/pci/devices/$other/sriov_numvfs"
	ln -s ../0000:51:00.1 "$sys/bus/pci/devices/$other/virtfn0"
	before=$(ls -l "$sys/bus/pci/devices/$other" "$dev"; cat "$sys/bus/pci/devices/$other/sriov_numvfs")
	cycle VFHEALTH_PARENT="$other" VFHEALTH_CYCLE_WAIT_S=1 -- "$other"
	expect_rc 2 "$what"
	one_line "$pattern" "$what"
	expect_calls "" "$what"
	[[ $(ls -l "$sys/bus/pci/devices/$other" "$dev"; cat "$sys/bus/pci/devices/$other/sriov_numvfs") == "$before" ]] ||
		fail "$what: the sysfs changed"
	echo "ok   refused: $what"
}
refused_device "a NIC (vendor 0x8086) beside the GPU" \
	"^sriov-cycle: $nic: not an NVIDIA GPU: .*/vendor reads '0x8086', not 0x10de$" "$nic"
refused_device "an NVIDIA device without sriov_totalvfs" \
	"^sriov-cycle: $plain: no .*/$plain/sriov_totalvfs: not an SR-IOV GPU$" "$plain" 0x10de
# sriov_numvfs 0 and nothing to say how many: refused too.
reset 0
cycle VFHEALTH_NUMVFS=
expect_rc 2 "sriov_numvfs 0 without VFHEALTH_NUMVFS"
one_line "SR-IOV is disabled \\(sriov_numvfs 0\\) and VFHEALTH_NUMVFS does not say" "sriov_numvfs 0 without VFHEALTH_NUMVFS"
expect_calls "" "sriov_numvfs 0 without VFHEALTH_NUMVFS"

echo "recovery script OK"
