#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# 200 targets of which 100 never answer: one poll takes about two deadlines
# (100 hung guests / 64 at once), not a hundred.  The bound asserted, 6
# deadlines, is generous for a loaded machine and still fails for a serial
# scan (100 deadlines) or a pool that waits per batch on the wrong thing.
source "$(dirname "$0")/lib.sh"

TIMEOUT=1
start_daemon --poll-interval 6 --poll-timeout "$TIMEOUT" --concurrency 64 --no-reconcile
AGENT_PROBE_INTERVAL=100 # they stay UNKNOWN: no need to probe often
start_agent a1
start_agent a2
start_vmm silent --never-answer

vf() { printf '0000:%02x:%02x.%d' $(($1 / 64 + 1)) $(($1 / 8 % 8)) $(($1 % 8)); }
setup_part() { # setup_part K: VFs i with i % 4 == K (four writers: the store groups commits)
	local i agent
	for ((i = $1; i < 200; i += 4)); do
		register_vf "$(vf "$i")"
		if ((i % 2)); then
			agent="hvsock:$T/silent.hv:2222" # a hung guest
		else
			agent="unix:$T/a$((i / 2 % 2 + 1)).sock"
		fi
		claim "$(vf "$i")" "vm-$i" "agent=$agent" "control=$T/silent.ctl"
	done
}
parts=()
for k in 0 1 2 3; do
	setup_part "$k" &
	parts+=("$!")
done
for p in "${parts[@]}"; do
	wait "$p" || fail "setting up 200 claims failed"
done

# Polls are 6 s apart, longer than the bound on one poll, so between two
# polls the counters hold still.  The poll that ends first after the setup
# may have begun before it; the next one began after it and covers all 200.
wait_polls 1 60
base_unknown=$(metric 'vfhealth_sentinel_checks_total{result="unknown"}')
base_rpc=$(metric 'vfhealth_sentinel_checks_total{result="rpc_error"}')
wait_polls 1 60
duration=$(metric vfhealth_sentinel_last_poll_duration_seconds)
unknown=$(($(metric 'vfhealth_sentinel_checks_total{result="unknown"}') - base_unknown))
rpc=$(($(metric 'vfhealth_sentinel_checks_total{result="rpc_error"}') - base_rpc))
echo "one poll of 200 targets (100 silent, timeout ${TIMEOUT}s, 64 at once): ${duration}s;" \
	"answered ${unknown}, timed out ${rpc}"
((unknown == 100)) || fail "$unknown answering guests checked in one poll, want 100"
((rpc == 100)) || fail "$rpc hung guests checked in one poll, want 100"
awk -v d="$duration" -v t="$TIMEOUT" 'BEGIN { exit !(d >= t && d < 6 * t) }' ||
	fail "poll took ${duration}s; want between one deadline ($TIMEOUT) and 6 deadlines"
echo PASS
