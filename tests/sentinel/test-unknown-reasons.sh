#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# UNKNOWN answers are counted by the agent's reason: an agent still probing
# (its nvidia-smi fails, no device nodes) counts under reason="probing",
# nothing under the others; every reason's series is present.
source "$(dirname "$0")/lib.sh"

VF=0000:41:00.4
start_daemon --poll-interval 0.2 --poll-timeout 2 --no-reconcile
register_vf "$VF"
start_agent g1
start_vmm g1
claim "$VF" vm-1 "agent=hvsock:$T/g1.hv:2222" "control=$T/g1.ctl"
wait_for 20 "unknown checks counted as probing" \
	metric_ge 'vfhealth_sentinel_unknown_total{reason="probing"}' 2
for r in unspecified no_device no_probe backing_off stopped; do
	[[ $(metric "vfhealth_sentinel_unknown_total{reason=\"$r\"}") == 0 ]] ||
		fail "reason $r counted: $(metric "vfhealth_sentinel_unknown_total{reason=\"$r\"}")"
done
grep -q '^# TYPE vfhealth_sentinel_unknown_total counter' "$MNT/metrics" || fail "no TYPE line"
file_is "$MNT/$VF/tally" 0 || fail "an unknown answer changed the tally"
echo PASS
