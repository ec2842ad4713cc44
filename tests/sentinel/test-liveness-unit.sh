#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Liveness under the shipped unit's capabilities: vfhealthd runs with the
# bounding set of vfhealthd.service's CapabilityBoundingSet=, no inheritable
# or ambient capabilities (AmbientCapabilities=) and no_new_privs (setpriv,
# as tests/ops/unit-sandbox.sh applies them), so its sentinel cannot open /proc/PID/ns/net of a process
# of another uid.  A stand-in VMM runs as uid 65534 (as libvirt's QEMU runs
# as libvirt-qemu) in the host's network namespace, listening on its control
# socket in a directory only it may enter:
#  - the claim (pid=, control=, agent=) is judged by its socket's identity:
#    watch=polled, its agent dialled, never counted or warned uncertain, its
#    VF out of allocatable;
#  - the VMM killed by SIGKILL: the claim is released (process gone);
#  - with /proc mounted hidepid=invisible,gid=G (as hardened hosts mount it:
#    only group G may see other users' processes, and root without
#    CAP_SYS_PTRACE is not in it), the VMM's entry is hidden from the
#    sentinel: its claim is kept, uncertain, never released as gone while it
#    runs; killed, it is released.
# Skips (77) without setpriv or root.
source "$(dirname "$0")/lib.sh"
require_cmd setpriv:util-linux
[[ $(id -u) == 0 ]] || skip "needs root (mounts as the unit does)"

unit=${VFHEALTH_SOURCE_ROOT:?}/examples/systemd/vfhealthd.service.in
caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$unit")
[[ -n $caps ]] || fail "$unit has no CapabilityBoundingSet="
bounding=-all
for c in $caps; do
	c=${c#CAP_}
	bounding+=",+${c,,}"
done
[[ $bounding != *sys_ptrace* ]] || skip "the unit keeps CAP_SYS_PTRACE: nothing to show"

# vfhealthd under the unit's limits (the wrapper execs it: the same pid).
cat >"$T/vfhealthd-unit" <<EOF
#!/bin/sh
exec setpriv --bounding-set $bounding --inh-caps -all --ambient-caps -all --no-new-privs -- "$VFHEALTHD" "\$@"
EOF
chmod 755 "$T/vfhealthd-unit"
VFHEALTHD=$T/vfhealthd-unit start_daemon --poll-interval 0.2 --poll-timeout 1 --reconcile-interval 0.2
SENTINEL=$(pgrep -P "$DAEMON_PID" -x vfhealth-sentin) || fail "no sentinel under vfhealthd"
# CAP_SYS_PTRACE is bit 19: the sentinel must not have it, or this shows nothing.
capeff=$(sed -n 's/^CapEff:[[:space:]]*//p' "/proc/$SENTINEL/status")
(((0x$capeff >> 19) & 1)) && fail "the sentinel has CAP_SYS_PTRACE (CapEff $capeff)"

VF=0000:41:00.6
register_vf "$VF"
dir=$T/vmm-nobody
mkdir -m 0700 "$dir"
chown 65534:65534 "$dir"
setpriv --reuid=65534 --regid=65534 --clear-groups "$TEST_VMM" --hvsock "$dir/vm.hv" \
	--control "$dir/vm.ctl" --never-answer --connect-log "$dir/connects" >>"$T/vmm.log" 2>&1 &
VMM=$!
BG_PIDS+=("$VMM")
wait_for 20 "the VMM's sockets" test -S "$dir/vm.hv"
[[ $(stat -c %u "$dir/vm.ctl") == 65534 ]] || fail "the control socket is not uid 65534's"
claim "$VF" vm-n "agent=hvsock:$dir/vm.hv:2222" "control=$dir/vm.ctl" "pid=$VMM"

watched_is() { [[ $(metric "vfhealth_sentinel_claims{watch=\"$1\"}") == "$2" ]]; }
wait_for 10 "the claim polled" watched_is polled 1
wait_for 10 "its agent dialled" lines_at_least "$dir/connects" 1
R0=$(metric vfhealth_sentinel_reconciles_total)
wait_for 10 "three reconciles" metric_ge vfhealth_sentinel_reconciles_total $((R0 + 3))
watched_is polled 1 || fail "the claim is no longer polled"
echo "ok   a VMM of uid 65534 under the unit's bounding set ($bounding): watch=polled, $(lines_in "$dir/connects") dial(s), 0 uncertain"
[[ $(metric vfhealth_sentinel_liveness_uncertain_total) == 0 ]] || fail "the claim was counted uncertain"
! grep -q "keeping the claim of vm-n" "$T/daemon.log" || fail "the claim was warned uncertain"
[[ -f $MNT/$VF/assignments/vm-n ]] || fail "the live claim was released"
! grep -qx "$VF" "$MNT/allocatable" || fail "the claimed VF is allocatable"

kill -KILL "$VMM"
wait "$VMM" 2>/dev/null || true
wait_for 10 "the dead VMM's claim released" test ! -e "$MNT/$VF/assignments/vm-n"
# the sentinel logs the release once its write returned, after the file went
wait_for 10 "the release logged" grep -q "vf $VF: released the claim of vm-n .*VMM dead (process gone)" "$T/daemon.log"

# A proc that hides other users' processes: the sentinel reads it (--proc-root).
mkdir "$T/proc"
mount -t proc -o hidepid=invisible,gid=65534 proc "$T/proc" ||
	skip "cannot mount proc with hidepid=invisible,gid=65534"
# shellcheck disable=SC2016 # expanded at exit
EXIT_HOOKS+=('umount -l "$T/proc"')
setpriv --reuid=65534 --regid=65534 --clear-groups sleep 3600 &
VMM=$!
BG_PIDS+=("$VMM")
sh -c "exec setpriv --bounding-set $bounding --inh-caps -all --ambient-caps -all --no-new-privs -- \
	test ! -e $T/proc/$VMM" || fail "hidepid=invisible,gid=65534 does not hide uid 65534's process here"
stop_daemon
VFHEALTHD=$T/vfhealthd-unit start_daemon --poll-interval 0.2 --poll-timeout 1 --reconcile-interval 0.2 \
	--proc-root "$T/proc"
claim "$VF" vm-h "agent=hvsock:$T/vm-h.hv:2222" "pid=$VMM"
wait_for 10 "the hidden VMM's claim uncertain" watched_is uncertain 1
R0=$(metric vfhealth_sentinel_reconciles_total)
wait_for 10 "three reconciles" metric_ge vfhealth_sentinel_reconciles_total $((R0 + 3))
[[ -f $MNT/$VF/assignments/vm-h ]] || fail "the claim of a VMM hidden by hidepid was released"
! grep -qx "$VF" "$MNT/allocatable" || fail "the VF of a hidden VMM is allocatable"
echo "ok   a VMM hidden by hidepid=invisible: its claim kept, uncertain"
kill -KILL "$VMM"
wait "$VMM" 2>/dev/null || true
wait_for 10 "the hidden VMM's claim released once it died" test ! -e "$MNT/$VF/assignments/vm-h"
stop_daemon
echo PASS
