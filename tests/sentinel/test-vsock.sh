#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# AF_VSOCK by CID: an agent listening on vsock:any, polled by the sentinel
# at vsock:1 (VMADDR_CID_LOCAL, the loopback transport).  Skips (77) where
# the machine has no vsock transport that reaches itself.
source "$(dirname "$0")/lib.sh"

PORT=$((20000 + $$ % 20000))
make_sysfs
mkfifo "$T/g.kmsg"
"$VFHEALTH_AGENT" --listen "vsock:any:$PORT" --kmsg "$T/g.kmsg" --sysfs-root "$T/sysfs" \
	>>"$T/agent.log" 2>&1 &
AGENT=$!
BG_PIDS+=("$AGENT")
reachable() {
	local rc=0
	"$VFHEALTH_AGENT" --query "vsock:1:$PORT" --timeout 1 >/dev/null 2>&1 || rc=$?
	((rc <= 2))
}
deadline=$((SECONDS + 3))
until reachable; do
	kill -0 "$AGENT" 2>/dev/null || skip "cannot listen on AF_VSOCK: $(tail -n 1 "$T/agent.log")"
	((SECONDS < deadline)) || skip "no vsock transport reaches CID 1 here"
	sleep 0.1
done

VF=0000:41:00.4
start_daemon --poll-interval 0.2 --poll-timeout 2 --no-reconcile
register_vf "$VF"
start_vmm ctl --never-answer # only its control socket matters
timeout 20 sh -c 'echo "3,1,1,-;NVRM: GPU 0000:00:03.0: RmInitAdapter failed! (0x22:0x65:884)" >"$1"' \
	sh "$T/g.kmsg" || fail "the agent does not read its kmsg FIFO"
claim "$VF" vm-1 "agent=vsock:1:$PORT" "control=$T/ctl.ctl"
wait_for 20 "tally 1 over AF_VSOCK" file_is "$MNT/$VF/tally" 1
echo PASS
