#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Liveness with a real VMM killed by SIGKILL: its control socket file stays
# behind, yet nothing listens there, so the claim is judged dead, is not
# polled from that verdict on (its hvsock path still exists; every query
# would count an rpc_error), and is released within two reconcile passes.
source "$(dirname "$0")/lib.sh"

VF=0000:41:00.4
start_daemon --poll-interval 0.1 --poll-timeout 1 --reconcile-interval 1
register_vf "$VF"
start_agent g1
start_vmm v1 --agent "unix:$T/g1.sock" --connect-log "$T/connects"
VMM=${BG_PIDS[-1]}
claim "$VF" vm-1 "agent=hvsock:$T/v1.hv:2222" "control=$T/v1.ctl" "pid=$VMM"
wait_for 20 "the live VMM polled" lines_at_least "$T/connects" 2

kill -KILL "$VMM"
wait "$VMM" 2>/dev/null || true
test -S "$T/v1.ctl" || fail "SIGKILL removed the control socket file"
test -S "$T/v1.hv" || fail "SIGKILL removed the hvsock file"
R0=$(metric vfhealth_sentinel_reconciles_total)

wait_for 20 "the dead verdict" grep -q "vf $VF: the VMM of vm-1 .* looks dead" "$T/daemon.log"
# Polls and verdicts run on one thread: no query is in flight now.
checks() {
	local r sum=0
	for r in ok failed unknown rpc_error unsupported_agent; do
		sum=$((sum + $(metric "vfhealth_sentinel_checks_total{result=\"$r\"}")))
	done
	echo "$sum"
}
C1=$(checks)
P1=$(polls)

# Released within two full reconcile passes after the kill (the pass running
# at the kill may have looked before it).
released_in_time() {
	local n
	n=$(metric vfhealth_sentinel_reconciles_total)
	[[ -e $MNT/$VF/assignments/vm-1 ]] || return 0
	((n < R0 + 3)) || fail "still claimed after $((n - R0)) reconcile passes"
	return 1
}
wait_for 20 "the dead claim released" released_in_time
((P1 + 3 <= $(polls))) || wait_polls 3
[[ $(checks) == "$C1" ]] || fail "the dead VMM's agent was queried after the verdict ($C1 -> $(checks))"
grep -q "^<6>.*vf $VF: released the claim of vm-1 .*VMM dead (process gone)" "$T/daemon.log" ||
	fail "release not logged"
[[ $(metric vfhealth_sentinel_claims_released_total) == 1 ]] || fail "claims_released != 1"
echo PASS
