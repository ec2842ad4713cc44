#!/bin/bash
# The real vfhealth-agent's detection options end to end (Unix socket, kmsg
# records through a file or FIFO, stand-in device nodes):
#   - OK without nvidia-smi: the device nodes open (a file stands in for a
#     GPU that came up); a blocking node (FIFO) keeps it unknown, probing;
#   - no cliff: after a short window the reason is backing_off and a node
#     that appears later still turns it OK; with --probe-backoff-max 0 the
#     probe stops (reason stopped); without nvidia-smi and the device probe
#     the reason is no_probe;
#   - rules: a loaded failure rule turns it FAILED and names the rule, an
#     ignore rule overrides the built-in one; a bad rules file is refused
#     with its line number.
#
# Environment (set by meson): VFHEALTH_AGENT, AGENT_PEER.
. "$(dirname "$0")/lib.sh"

AGENT_PID=
stop_agent() {
	if [ -n "$AGENT_PID" ]; then kill "$AGENT_PID"; wait "$AGENT_PID" || true; fi 2>/dev/null
	AGENT_PID=
}
on_exit stop_agent
mkdir -p "$T/sys/bus/pci/devices/0000:00:03.0" "$T/dev"
echo 0x10de > "$T/sys/bus/pci/devices/0000:00:03.0/vendor"
EP=unix:$T/agent.sock

# start_agent ARGS...: a fresh agent on $EP, its log in $LOG; its PATH is
# $AGENT_PATH when set (no nvidia-smi to find there).
start_agent() {
	stop_agent
	: > "$LOG"
	PATH=${AGENT_PATH:-$PATH} "$AGENT" -v --listen "$EP" --sysfs-root "$T/sys" --probe-interval 0.05 \
		--probe-timeout 0.5 "$@" </dev/null >/dev/null 2>"$LOG" &
	AGENT_PID=$!
	wait_until 10 answers || fail "agent never answered (rc $Q_RC: $Q_OUT)"
}
# start_backing_off KMSG MAX: an agent whose probe (no GPU: nvidia-smi
# fails) backs off up to MAX seconds after a 0.2 s window.
start_backing_off() {
	start_agent --kmsg "$1" --dev-dir "$T/dev" --nvidia-smi /bin/false --probe-window 0.2 \
		--probe-backoff-max "$2"
}
answers() { query "$EP"; [ "$Q_RC" -ne 3 ]; }
answer_is() { query "$EP"; [ "$Q_RC" -eq "$1" ] && [ "$Q_OUT" = "$2" ]; }
unknown_for() { answer_is 2 "unknown
reason: $1"; }
# expect_unknown REASON [SECONDS]: the answer is unknown for REASON now, or
# (with SECONDS) within that many.
expect_unknown() {
	if [ -n "${2:-}" ]; then wait_until "$2" unknown_for "$1"; else unknown_for "$1"; fi ||
		fail "want unknown/$1, got rc $Q_RC: $Q_OUT"
}

echo "== a blocking device node: unknown, probing; the attempt is killed"
mkfifo "$T/dev/nvidiactl"
touch "$T/dev/nvidia0"
start_agent --kmsg /dev/null --dev-dir "$T/dev" --nvidia-smi /bin/false --probe-window 60
expect_unknown probing
wait_until 10 logged "did not finish" || fail "a blocked attempt was never killed"

echo "== the nodes open: ok without nvidia-smi"
rm "$T/dev/nvidiactl"
touch "$T/dev/nvidiactl"
AGENT_PATH=/nonexistent start_agent --kmsg /dev/null --dev-dir "$T/dev" --probe-window 60
wait_until 10 answer_is 0 ok || fail "never ok from the device nodes (rc $Q_RC: $Q_OUT)"

echo "== no cliff: backing off after the window, then ok when the node appears"
rm "$T/dev/nvidia0"
start_backing_off /dev/null 0.4
expect_unknown backing_off 10
touch "$T/dev/nvidia0"
wait_until 10 answer_is 0 ok || fail "a late node never turned it ok (rc $Q_RC: $Q_OUT)"
rm "$T/dev/nvidia0"

echo "== --probe-backoff-max 0: the old cliff, reason stopped"
start_backing_off /dev/null 0
expect_unknown stopped 10

echo "== no nvidia-smi, no device probe: no_probe"
AGENT_PATH=/nonexistent start_agent --kmsg /dev/null --no-device-probe
expect_unknown no_probe
logged "cannot report ok" || fail "no warning that this agent cannot report ok"

echo "== a failure after the window stops the back-off"
mkfifo "$T/kmsg"
start_backing_off "$T/kmsg" 0.2
expect_unknown backing_off 10
printf '3,1,1,-;NVRM: GPU 0000:00:03.0: RmInitAdapter failed! (0x22:0x65:884)\n' > "$T/kmsg"
wait_until 10 query_is "$EP" 1 || fail "never failed (rc $Q_RC: $Q_OUT)"
wait_until 10 logged "probe: stopped" || fail "probing went on after the failure"

echo "== rules: a loaded failure rule, an ignore rule over the built-in one"
cat > "$T/rules" <<'RULES'
# GSP and "no devices" shapes; one known-benign RmInitAdapter line
failure GSP firmware init failed
failure None of the NVIDIA devices were initialized.
ignore RmInitAdapter failed! (0x25:0x65:1453)
RULES
printf '%s\n' \
	'3,1,1,-;NVRM: GPU 0000:00:03.0: RmInitAdapter failed! (0x25:0x65:1453)' \
	'3,2,2,-;NVRM: vfhk marker-ignored' > "$T/kmsg-ignored"
start_agent --kmsg "$T/kmsg-ignored" --rules "$T/rules" --dev-dir "$T/dev" \
	--nvidia-smi /bin/false --probe-window 60
wait_until 10 logged "marker-ignored" || fail "records never read"
logged "ignored by rule 'RmInitAdapter failed! (0x25:0x65:1453)'" || fail "ignore rule not used"
unknown_for probing || fail "an ignored line changed the answer: rc $Q_RC: $Q_OUT"
GSP='NVRM: GPU 0000:00:03.0: GSP firmware init failed (0x62)'
printf '3,1,1,-;%s\n' "$GSP" > "$T/kmsg-gsp"
start_agent --kmsg "$T/kmsg-gsp" --rules "$T/rules" --dev-dir "$T/dev" \
	--nvidia-smi /bin/false --probe-window 60
wait_until 10 answer_is 1 "failed
$GSP
rule: GSP firmware init failed" || fail "want failed by the GSP rule, got rc $Q_RC: $Q_OUT"

echo "== a bad rules file is refused with its line number"
stop_agent
printf '# fine\nfailure ok\nfailue typo\n' > "$T/bad-rules"
rc=0; out=$("$AGENT" --listen "$EP" --sysfs-root "$T/sys" --rules "$T/bad-rules" 2>&1 </dev/null) || rc=$?
[ "$rc" -eq 1 ] || fail "a bad rules file: exit $rc, want 1"
grep -qF -- "--rules $T/bad-rules:3: expected 'failure TEXT' or 'ignore TEXT'" <<<"$out" ||
	fail "no line number in: $out"
rc=0; out=$("$AGENT" --listen "$EP" --rules "$T/none" 2>&1 </dev/null) || rc=$?
[ "$rc" -eq 1 ] || fail "a missing rules file: exit $rc, want 1"
grep -q "No such file" <<<"$out" || fail "a missing rules file said: $out"
[ ! -e "$T/agent.sock" ] || fail "a refused start left a socket"
echo PASS
