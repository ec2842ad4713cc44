#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A parent GPU's directory on a real mount: gpus/ lists every parent a
# registered VF names (from sysfs physfn links, --sysfs-root, read at
# registration or recorded by a write of VF/parent);
# gpus/PF/ has vfs, state, drain and history.  `echo 1 > drain` takes every
# VF of the GPU out of allocatable and refuses new claims (EBUSY) at once,
# live claims stay (draining) until they end (drained), other GPUs serve,
# allocatable watchers are woken; it is no quarantine; bad input changes
# nothing, also through one descriptor; only writers may drain; the drain
# and its history survive a restart; `echo 0` serves again; metrics show
# each GPU's state apart from quarantines.
source "$(dirname "$0")/lib.sh"
require_fuse
require_cmd inotifywait:inotify-tools
mount_tmpfs "$T/db" 4m 0700

fake_sysfs 0000:41:00.1 0000:41:00.2 0000:41:00.3 0000:42:00.1
start_daemon

assert_eq "$(ls "$MNT/gpus")" "" "no GPU before a VF names one"
for vf in 0000:41:00.1 0000:41:00.2 0000:41:00.3 0000:42:00.1 0000:43:00.1; do
	mkdir "$MNT/$vf"
done
fake_sysfs 0000:43:00.1 # its sysfs entry appears after its registration
put "$MNT/0000:43:00.1/parent" 0000:43:00.0
assert_eq "$(ls "$MNT/gpus" | tr '\n' ' ')" "0000:41:00.0 0000:42:00.0 0000:43:00.0 " "gpus/"
G=$MNT/gpus/0000:41:00.0
assert_eq "$(ls "$G" | tr '\n' ' ')" "drain history recover state vfs " "a GPU's files"
assert_eq "$(stat -c '%a %F' "$G")" "755 directory" "a GPU's directory"
for f in vfs:444 state:444 drain:664 history:444 recover:664; do
	assert_eq "$(stat -c %a "$G/${f%:*}")" "${f#*:}" "mode of ${f%:*}"
done
assert_cat "$G/vfs" "$(printf '0000:41:00.1\n0000:41:00.2\n0000:41:00.3')"
assert_cat "$G/state" serving
assert_cat "$G/drain" 0
assert_cat "$G/history" ""
[[ ! -e $MNT/gpus/0000:44:00.0 ]] || fail "a GPU no VF names exists"
expect_err "$ENOENT" cat "$MNT/gpus/0000:44:00.0/state"
expect_err "$ENOENT" cat "$MNT/gpus/gpu0/state"

# --- bad input changes nothing, also through one descriptor
for bad in 2 yes "1 " "" 01; do
	expect_err "$EINVAL" put "$G/drain" "$bad"
done
bash -c 'exec 3>"$1"; echo 2 >&3 && exit 1; echo maybe >&3 && exit 1; exit 0' sh "$G/drain" ||
	fail "a bad write through one descriptor was accepted"
assert_cat "$G/state" serving
assert_cat "$G/history" ""
# only writers drain
expect_err "$EACCES" as_user 65534 sh -c "echo 1 > $G/drain"
assert_cat "$G/state" serving

# --- a drain with a live claim
touch "$MNT/0000:41:00.1/assignments/vm-live"
background inotifywait -m -e close_write --format '%f %e' "$MNT" >"$T/iw.out" 2>"$T/iw.err"
wait_until 10 grep -q "Watches established" "$T/iw.err" || fail "inotifywait did not start"
alloc_events() { grep -c '^allocatable CLOSE_WRITE' "$T/iw.out" || true; }
alloc_events_above() { (($(alloc_events) > $1)); }
before=$(alloc_events)
# dash's echo too: the file is for operators' shells
dash -c 'echo 1 > "$1"' sh "$G/drain"
wait_for 10 "the inotify event of a drain" alloc_events_above "$before"
assert_cat "$G/state" draining
assert_cat "$G/drain" 1
allocatable=$(cat "$MNT/allocatable")
for vf in 0000:41:00.1 0000:41:00.2 0000:41:00.3; do
	! grep -qx "$vf" <<<"$allocatable" || fail "$vf of a drained GPU is allocatable"
done
assert_eq "$(sort <<<"$allocatable" | tr '\n' ' ')" "0000:42:00.1 0000:43:00.1 " "allocatable"
assert_match "$(cat "$MNT/resources")" "allocatable_slots 2" "resources"
expect_err "$EBUSY" touch "$MNT/0000:41:00.2/assignments/vm-new"
[[ ! -e $MNT/0000:41:00.2/assignments/vm-new ]] || fail "a claim on a drained GPU exists"
touch "$MNT/0000:42:00.1/assignments/vm-other" # another GPU serves
[[ -e $MNT/0000:41:00.1/assignments/vm-live ]] || fail "the live claim did not stay"
# no quarantine: the VFs' own state and the breaker's count are untouched
assert_cat "$MNT/0000:41:00.2/state" ok
assert_cat "$MNT/quarantined" ""
# shown apart in metrics
gpu_series() { grep "^vfhealth_gpu_state{parent=\"0000:41:00.0\"" "$MNT/metrics"; }
assert_eq "$(gpu_series | tr '\n' ' ')" \
	'vfhealth_gpu_state{parent="0000:41:00.0",state="serving"} 0 vfhealth_gpu_state{parent="0000:41:00.0",state="draining"} 1 vfhealth_gpu_state{parent="0000:41:00.0",state="drained"} 0 vfhealth_gpu_state{parent="0000:41:00.0",state="recovering"} 0 vfhealth_gpu_state{parent="0000:41:00.0",state="failed"} 0 ' \
	"vfhealth_gpu_state while draining"
grep -qx 'vfhealth_quarantined_vfs 0' "$MNT/metrics" || fail "a drain counted as a quarantine"
# again: a no-op, nothing in the history
put "$G/drain" 1
assert_eq "$(grep -c . "$G/history")" 1 "history lines"
assert_match "$(cat "$G/history")" "^[0-9T:.-]+Z drain by=0$" "history"

# --- the claim ends: drained
rm "$MNT/0000:41:00.1/assignments/vm-live"
assert_cat "$G/state" drained
expect_err "$EBUSY" touch "$MNT/0000:41:00.1/assignments/vm-live"
assert_match "$(gpu_series)" 'state="drained"\} 1' "vfhealth_gpu_state when drained"

# --- a restart keeps the drain
stop_daemon
start_daemon
assert_cat "$G/state" drained
! grep -q '^0000:41' "$MNT/allocatable" || fail "a drained GPU's VF is allocatable after a restart"
expect_err "$EBUSY" touch "$MNT/0000:41:00.3/assignments/vm-new"

# --- the drain ends: serving
before=$(alloc_events)
put "$G/drain" 0
assert_cat "$G/state" serving
assert_cat "$G/drain" 0
grep -qx 0000:41:00.2 "$MNT/allocatable" || fail "an undrained GPU's VF is not allocatable"
touch "$MNT/0000:41:00.2/assignments/vm-new"
assert_eq "$(sed 's/^[^ ]* //' "$G/history" | tr '\n' ' ')" "drain by=0 undrain by=0 " "history"
stop_daemon
