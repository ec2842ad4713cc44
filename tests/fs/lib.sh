# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# tests/fs/lib.sh - sourced by the fs integration tests: the harness
# (tests/lib/harness.sh: temp dir, cleanup, start/stop/kill of a real
# vfhealthd, waits, errno strings) plus the fs suite's own assertions and the
# ways an operator writes a file.  Every test skips (exit 77) only when FUSE
# cannot be mounted here.
# shellcheck source=../lib/harness.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"

# The file interface alone: the sentinel (tests/sentinel) would poll and
# reconcile the test's claims (--no-sentinel alone still reconciles).  A
# test may clear this.
DAEMON_ARGS=(--no-sentinel --no-reconcile)

# stall_syncs GATE: the next start_daemon preloads tests/fs/stallsync.c,
# which holds each sync of the database's files while GATE, a FIFO, exists,
# until the test writes a byte to it: a commit as long as the test wants.
stall_syncs() {
	: "${STALLSYNC:?STALLSYNC must name libstallsync.so (set by meson)}"
	# The shim comes before the sanitizer runtime in the library list: tell
	# ASan that is intended.
	DAEMON_ENV=(LD_PRELOAD="$STALLSYNC" VFHEALTH_STALL_DIR="$(dirname "$DB")/"
		VFHEALTH_STALL_FIFO="$1"
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0")
}

# The whole content of a file, through cat.
assert_cat() {
	local got
	got=$(cat "$1") || fail "cat $1 failed"
	assert_eq "$got" "$2" "cat $1"
}

# settle_cat FILE EXPECTED: FILE comes to read EXPECTED.  A change vfhealthd
# commits on its own (the recovery thread's, the policy's) reaches the
# page-cached VF/quarantined when the notifier has invalidated it, after
# the commit that a read-through file (gpus/PF/state) shows at once; only a
# write through the mount is answered after the invalidation.
settle_cat() {
	cat_is() { [[ $(cat "$1") == "$2" ]]; }
	wait_for 10 "cat $1 to read '$2' (it reads '$(cat "$1")')" cat_is "$1" "$2"
}

# make_vfs NAME...: mkdir the VFs 0000:41:00.4, .5, ... in order, each
# one's directory on the mount in the variable NAME.
make_vfs() {
	local i=4 name
	for name; do
		printf -v "$name" %s "$MNT/0000:41:00.$i"
		mkdir "${!name}"
		i=$((i + 1))
	done
}

# claim_stamp FILE: the claimed_at a claim file reads.
claim_stamp() {
	sed -n 's/^claimed_at=//p' "$1"
}

# put FILE TEXT: `echo TEXT > FILE` through sh -c, as an operator would.
# coreutils' echo rather than dash's builtin, which reports every failed
# write as "I/O error" whatever the errno.
put() {
	sh -c '/bin/echo "$2" > "$1"' sh "$1" "$2"
}

# unclaim FILE: release the claim FILE is by the claimed_at it reads, as a
# VMM manager does once its VMM is gone (rm refuses while the claim's pid=
# runs, and the tests' claims name the test's own shell).
unclaim() {
	local at
	at=$(claim_stamp "$1")
	[[ -n $at ]] || fail "unclaim $1: no claim"
	put "$1" "release=$at"
}

# putf FILE FORMAT...: printf through sh -c (multi-line commands, no newline).
putf() {
	local file=$1
	shift
	sh -c 'f=$1; shift; /usr/bin/printf "$@" > "$f"' sh "$file" "$@"
}

# as_user UID COMMAND...: run as an unprivileged user with no groups.
as_user() {
	local uid=$1
	shift
	setpriv --reuid="$uid" --regid="$uid" --clear-groups "$@"
}

# ---- a fake sysfs (--sysfs-root) ------------------------------------------------

# fake_sysfs VF...: $T/sys with each VF's directory and its physfn link to
# its parent, the function 0 of the same device (../0000:41:00.0 for
# 0000:41:00.3, as the kernel links them), and the parents' directories,
# NVIDIA GPUs with SR-IOV (fake_pf); vfhealthd is told (DAEMON_ARGS).
# SYSFS_DEVICES: the devices directory.
SYSFS_DEVICES=$T/sys/bus/pci/devices
fake_sysfs() {
	local vf
	for vf in "$@"; do
		[[ -e $SYSFS_DEVICES/${vf%.*}.0/vendor ]] || fake_pf "${vf%.*}.0" 0x10de
		mkdir -p "$SYSFS_DEVICES/$vf"
		ln -sfn "../${vf%.*}.0" "$SYSFS_DEVICES/$vf/physfn"
	done
	[[ " ${DAEMON_ARGS[*]} " == *" --sysfs-root $T/sys "* ]] || DAEMON_ARGS+=(--sysfs-root "$T/sys")
}

# fake_pf PF VENDOR: a physical function with SR-IOV (sriov_totalvfs) of
# that vendor (0x10de: NVIDIA; 0x8086: an Intel NIC), in $T/sys.
fake_pf() {
	mkdir -p "$SYSFS_DEVICES/$1"
	echo "$2" >"$SYSFS_DEVICES/$1/vendor"
	echo 16 >"$SYSFS_DEVICES/$1/sriov_totalvfs"
}

# fake_virtfns PF VF...: PF's virtfnN links, one per VF in order, and its
# sriov_numvfs, as after `echo N > sriov_numvfs` (replacing earlier ones).
fake_virtfns() {
	local pf=$1 i=0 vf
	shift
	rm -f "$SYSFS_DEVICES/$pf"/virtfn*
	for vf in "$@"; do
		ln -s "../$vf" "$SYSFS_DEVICES/$pf/virtfn$i"
		i=$((i + 1))
	done
	echo "$#" >"$SYSFS_DEVICES/$pf/sriov_numvfs"
}

# fake_host: two NVIDIA GPUs and a NIC with SR-IOV, from the caller's
# GPU GPUB NIC (PF addresses), VFS (GPU's VFs), VFB (GPUB's one VF) and
# NICVFS (the NIC's, vendor 0x8086: never a vfhealth VF).
fake_host() {
	fake_pf "$NIC" 0x8086
	fake_sysfs "${VFS[@]}" "$VFB" "${NICVFS[@]}"
	fake_virtfns "$GPU" "${VFS[@]}"
	fake_virtfns "$GPUB" "$VFB"
	fake_virtfns "$NIC" "${NICVFS[@]}"
}

# ---- watchers, armed on return --------------------------------------------------

# start_inotify NAME PATH...: inotifywait -m on the paths into $T/NAME.out.
start_inotify() {
	local name=$1
	shift
	background inotifywait -m -e modify -e close_write --format '%w%f %e' "$@" \
		>"$T/$name.out" 2>"$T/$name.err"
	wait_until 10 grep -q "Watches established" "$T/$name.err" ||
		fail "inotifywait $name did not start: $(cat "$T/$name.err")"
}

# expect_inotify NAME LINE: the watcher printed LINE ("PATH EVENT").
expect_inotify() {
	wait_until 10 grep -qx "$2" "$T/$1.out" || fail "inotify $1: no '$2' in: $(cat "$T/$1.out")"
	pass "inotify $1: $2"
}

# start_poll NAME FILE [EXPECTED]: vftool poll on FILE until a wake-up (that
# shows EXPECTED: earlier changes may still be in flight when it arms, as
# for any real watcher); armed (first read done) on return.
start_poll() {
	background "$VFTOOL" poll "$2" 10000 "${@:3}" >"$T/$1.out"
	eval "POLL_$1=\${BG_PIDS[-1]}"
	wait_until 10 grep -q armed "$T/$1.out" || fail "poll watcher $1 did not start"
}

# expect_woken NAME: the poll watcher saw POLLPRI|POLLERR and its content.
expect_woken() {
	local pid_var=POLL_$1 rc=0
	wait "${!pid_var}" || rc=$?
	((rc == 0)) || fail "poll watcher $1 was not woken: $(cat "$T/$1.out")"
	assert_eq "$(sed -n 2p "$T/$1.out")" "woken POLLPRI POLLERR" "poll watcher $1"
}
