#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Liveness by identity, with real processes on a real mount: a control
# socket counts when a listening socket is bound to the very file
# (device, inode) the claim's control= path names, as the kernel's socket
# diagnostics tell it; a pid counts when it runs, not as a zombie, with its
# recorded start time.
#  - forged: an unprivileged user listens on an abstract socket whose name
#    holds a newline and a /proc/net/unix line naming a dead VMM's control
#    path: the dead claim is released all the same, never polled;
#  - jailed: a VMM chroot'ed like Firecracker's jailer binds
#    /run/firecracker.socket inside its jail; the claim names the host path:
#    alive, polled, kept (with and without pid=);
#  - zombie: a VMM killed by SIGKILL whose parent does not reap it keeps its
#    pid and start time: dead, released;
#  - a pid that runs while its control socket is nowhere: uncertain, kept,
#    warned once, counted every pass.
source "$(dirname "$0")/lib.sh"
require_cmd setpriv:util-linux

F=0000:41:00.1 # forged
J=0000:41:00.2 # jailed, with pid
K=0000:41:00.3 # jailed, control only
Z=0000:41:00.4 # zombie, pid only
U=0000:41:00.5 # uncertain
# --control-grace 0: judged at once (the startup grace is test-late-bind.sh's).
start_daemon --poll-interval 0.2 --poll-timeout 1 --reconcile-interval 0.2 --control-grace 0
for vf in "$F" "$J" "$K" "$Z" "$U"; do register_vf "$vf"; done

# forged: the victim VMM dies by SIGKILL (its socket file stays); the forger
# is nobody, with no access to any file involved.
start_dead_vmm victim --never-answer --connect-log "$T/victim.connects"
mkfifo "$T/forger.out"
setpriv --reuid=65534 --regid=65534 --clear-groups "$TEST_VMM" --forge-abstract "$T/victim.ctl" \
	>"$T/forger.out" 2>>"$T/forger.log" &
BG_PIDS+=("$!")
read -r -t 20 ready <"$T/forger.out" || ready=
[[ $ready == ready ]] || fail "the forger did not start: $(cat "$T/forger.log")"
# The forgery is in the kernel's text table: a text reader would be fooled.
grep -qx "0000000000000000: 00000002 00000000 00010000 0001 01 4242 $T/victim.ctl" /proc/net/unix ||
	fail "the forged line is not in /proc/net/unix"
claim "$F" vm-f "agent=hvsock:$T/victim.hv:2222" "control=$T/victim.ctl"

# jailed: the jail's root is under the socket directory; the VMM binds
# inside it.  The claims name the host paths.
mkdir -p "$T/jail/run"
"$TEST_VMM" --chroot "$T/jail" --hvsock /run/firecracker.hv --control /run/firecracker.socket \
	--never-answer --connect-log "$T/jail.connects" >>"$T/jail.log" 2>&1 &
JAILED=$!
BG_PIDS+=("$JAILED")
wait_for 20 "the jailed VMM's sockets" test -S "$T/jail/run/firecracker.hv"
claim "$J" vm-j "agent=hvsock:$T/jail/run/firecracker.hv:2222" \
	"control=$T/jail/run/firecracker.socket" "pid=$JAILED"
claim "$K" vm-k "agent=hvsock:$T/jail/run/firecracker.hv:2222" \
	"control=$T/jail/run/firecracker.socket"

# zombie: the subshell starts the VMM, then becomes a sleep that never reaps.
(
	"$TEST_VMM" --hvsock "$T/z.hv" --control "$T/z.ctl" --never-answer >>"$T/z.log" 2>&1 &
	echo $! >"$T/z.pid"
	exec sleep 3600
) &
BG_PIDS+=("$!")
wait_for 20 "the zombie-to-be's sockets" test -S "$T/z.hv"
ZPID=$(cat "$T/z.pid")
claim "$Z" vm-z "pid=$ZPID"

# uncertain: a process that runs, and a control path nothing is bound to.
start_sleeper RUNNING
claim "$U" vm-u "control=$T/nowhere.ctl" "pid=$RUNNING"

wait_for 20 "the forged claim released" test ! -e "$MNT/$F/assignments/vm-f"
grep -q "vf $F: released the claim of vm-f .*VMM dead (no socket listening on the control path)" \
	"$T/daemon.log" || fail "forged: release reason not logged"
[[ $(lines_in "$T/victim.connects") == 0 ]] || fail "forged: the dead VMM's agent was dialled"

R0=$(metric vfhealth_sentinel_reconciles_total)
kill -KILL "$ZPID"
wait_for 20 "a zombie" grep -q '^State:.*Z' "/proc/$ZPID/status"
wait_for 20 "the zombie's claim released" test ! -e "$MNT/$Z/assignments/vm-z"
grep -q "vf $Z: released the claim of vm-z .*VMM dead (process ended (a zombie))" "$T/daemon.log" ||
	fail "zombie: release reason not logged"
grep -q '^State:.*Z' "/proc/$ZPID/status" || fail "zombie: reaped before the verdict"

wait_for 20 "more reconcile passes" metric_ge vfhealth_sentinel_reconciles_total $((R0 + 4))
wait_for 20 "the jailed VMM polled" lines_at_least "$T/jail.connects" 2
for c in "$J/assignments/vm-j" "$K/assignments/vm-k" "$U/assignments/vm-u"; do
	[[ -f $MNT/$c ]] || fail "$c released"
done
! grep -q "vm-[jk] .*looks dead" "$T/daemon.log" || fail "jailed: judged dead"
! grep -q "keeping the claim of vm-[jk] " "$T/daemon.log" || fail "jailed: judged uncertain"
[[ $(metric 'vfhealth_sentinel_claims{watch="polled"}') == 2 ]] || fail "jailed: not counted as polled"
[[ $(grep -c "^<4>.*vf $U: keeping the claim of vm-u .*process runs, but no socket listens on its control path" \
	"$T/daemon.log") == 1 ]] || fail "uncertain: not warned exactly once"
metric_ge vfhealth_sentinel_liveness_uncertain_total 4 || fail "uncertain: not counted every pass"
[[ $(metric vfhealth_sentinel_claims_released_total) == 2 ]] || fail "released other than forged and zombie"
echo PASS
