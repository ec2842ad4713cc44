#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A claim whose VMM control socket is gone is never polled (its vsock CID may
# belong to another guest by now); once the control path exists it is.
source "$(dirname "$0")/lib.sh"

VF=0000:41:00.4
start_daemon --poll-interval 0.2 --poll-timeout 2 --reconcile-interval 0.2
register_vf "$VF"
start_agent g1
agent_fail g1
start_vmm g1 --agent "unix:$T/g1.sock" --connect-log "$T/connects"

# pid = this shell: its VMM "runs", so reconcile keeps the claim.
claim "$VF" vm-1 "agent=hvsock:$T/g1.hv:2222" "control=$T/gone.ctl" "pid=$$"
wait_polls 5
[[ $(lines_in "$T/connects") == 0 ]] || fail "the agent of a VMM without control socket was queried"
for r in ok failed unknown rpc_error; do
	[[ $(metric "vfhealth_sentinel_checks_total{result=\"$r\"}") == 0 ]] || fail "$r check counted"
done
file_is "$MNT/$VF/tally" 0 || fail "reported without a control socket"
[[ -f $MNT/$VF/assignments/vm-1 ]] || fail "reconcile released a claim whose pid runs"

# The same claim with its control socket back is polled (the check above
# could otherwise pass for any reason).
# A hard link: the same socket under the claim's name (a symlink would not
# be followed, issue 12).
ln "$T/g1.ctl" "$T/gone.ctl"
wait_for 20 "tally 1 once the control socket exists" file_is "$MNT/$VF/tally" 1
[[ $(lines_in "$T/connects") -ge 1 ]] || fail "no query reached the VMM"
echo PASS
