#!/bin/bash
# On the real kernel: a line written to /dev/kmsg by userspace looks exactly
# like the driver's, but the kernel files it under LOG_USER, so the agent
# must judge it "not-kernel" and stay UNKNOWN.  Needs root (to write
# /dev/kmsg); skips (77) otherwise.  Waits for the agent to log its verdict
# on a marker record written after the NVRM line, never a blind sleep.
#
# Programs: VFHEALTH_AGENT (set by meson).
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || skip "not root: cannot write /dev/kmsg"
[ -r /dev/kmsg ] && [ -w /dev/kmsg ] || skip "/dev/kmsg not readable and writable"
: > /dev/kmsg 2>/dev/null || skip "writes to /dev/kmsg refused"

AGENT_PID=
on_exit 'if [ -n "$AGENT_PID" ]; then kill "$AGENT_PID"; wait "$AGENT_PID"; fi 2>/dev/null'
mkdir -p "$T/sys/bus/pci/devices/0000:00:03.0"
echo 0x10de > "$T/sys/bus/pci/devices/0000:00:03.0/vendor"
MARK="vfhealth-kmsg-real-$$-$RANDOM"

"$AGENT" -v --listen "unix:$T/agent.sock" --kmsg /dev/kmsg --sysfs-root "$T/sys" \
	--nvidia-smi /bin/false --probe-window 0.1 </dev/null >/dev/null 2>"$LOG" &
AGENT_PID=$!
EP=unix:$T/agent.sock
answers() { query "$EP"; [ "$Q_RC" -ne 3 ]; }
wait_until 10 answers || fail "agent never answered (rc $Q_RC: $Q_OUT)"
# Normally unknown; on a machine whose kernel log holds a real driver
# failure, failed with that line.  Either way our write must change nothing.
BEFORE_RC=$Q_RC
BEFORE=$Q_OUT

echo '<3>NVRM: GPU 0000:00:03.0: RmInitAdapter failed! (0x22:0x65:884)' > /dev/kmsg
echo "<3>$MARK" > /dev/kmsg
wait_until 10 logged "$MARK" || fail "the agent never read the marker record"
grep -q "pri=11 " <<<"$(grep -F "not-kernel: NVRM: GPU 0000:00:03.0: RmInitAdapter failed! (0x22:0x65:884)" "$LOG")" ||
	fail "the NVRM line was not judged a LOG_USER record"
query "$EP"
[ "$Q_RC" -eq "$BEFORE_RC" ] && [ "$Q_OUT" = "$BEFORE" ] ||
	fail "a userspace NVRM line changed the answer: '$BEFORE' -> '$Q_OUT'"
[ "$BEFORE_RC" -eq 2 ] || echo "note: this kernel's log already holds a driver failure"
echo PASS
