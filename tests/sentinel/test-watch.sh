#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# No claim goes unseen: every poll counts each live claim once in
# vfhealth_sentinel_claims{watch=...}.  A claim without agent= (exclusion
# only) is no_agent and never dialled; a claim with agent= but neither pid=
# nor control= (nothing to tell its VMM by) is no_evidence, never dialled
# (its vsock CID may be anyone's), and said once at notice.
source "$(dirname "$0")/lib.sh"

P=0000:41:00.1 # polled
N=0000:41:00.2 # no agent
E=0000:41:00.3 # no evidence
start_daemon --poll-interval 0.1 --poll-timeout 2 --no-reconcile
for vf in "$P" "$N" "$E"; do register_vf "$vf"; done
start_agent g1
agent_fail g1
start_vmm g1 --agent "unix:$T/g1.sock" --connect-log "$T/connects"
start_vmm other --agent "unix:$T/g1.sock" --connect-log "$T/other.connects"

claim "$P" vm-p "agent=hvsock:$T/g1.hv:2222" "control=$T/g1.ctl"
claim "$N" vm-n "control=$T/g1.ctl"
# Made by older daemons; a filesystem that refuses it leaves nothing to watch.
evidence=1
claim "$E" vm-e "agent=hvsock:$T/other.hv:2222" 2>"$T/e.err" || evidence=0
wait_for 20 "the polled claim reported" file_is "$MNT/$P/tally" 1
wait_polls 5
[[ $(metric 'vfhealth_sentinel_claims{watch="polled"}') == 1 ]] || fail "polled != 1"
[[ $(metric 'vfhealth_sentinel_claims{watch="no_agent"}') == 1 ]] || fail "no_agent != 1"
for w in uncertain dead unconfined; do
	[[ $(metric "vfhealth_sentinel_claims{watch=\"$w\"}") == 0 ]] || fail "$w != 0"
done
if ((evidence)); then
	[[ $(metric 'vfhealth_sentinel_claims{watch="no_evidence"}') == 1 ]] || fail "no_evidence != 1"
	[[ $(lines_in "$T/other.connects") == 0 ]] || fail "a claim without liveness evidence was dialled"
	[[ $(grep -c "^<5>.*vf $E: the claim of vm-e names an agent but neither pid= nor control=: never polled" \
		"$T/daemon.log") == 1 ]] || fail "not said exactly once"
else
	grep -q "$EINVAL" "$T/e.err" || fail "claim with agent= alone: $(cat "$T/e.err")"
	[[ $(metric 'vfhealth_sentinel_claims{watch="no_evidence"}') == 0 ]] || fail "no_evidence != 0"
fi
file_is "$MNT/$N/tally" 0 || fail "a claim without agent was reported"

# Released: no longer counted.
release "$P" vm-p
wait_polls 2
[[ $(metric 'vfhealth_sentinel_claims{watch="polled"}') == 0 ]] || fail "a released claim still counted"
echo PASS
