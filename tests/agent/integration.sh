#!/bin/bash
# The real vfhealth-agent on a Unix socket, fed kernel records through a FIFO,
# queried with `vfhealth-agent --query`: UNKNOWN -> FAILED -> OK, OK stays
# after another failure record, userspace records never count, the FIFO's
# writer may come and go, an idle agent makes no wakeups, hostile clients
# do not hurt it, hybrid vsock through a fake VMM, clean shutdown, and an
# agent on a machine without an NVIDIA device.
#
# Programs: VFHEALTH_AGENT, AGENT_PEER (set by meson).
. "$(dirname "$0")/lib.sh"

AGENT_PID=
VMM_PID=
stop_agents() {
	exec 3>&-
	if [ -n "$VMM_PID" ]; then kill "$VMM_PID"; wait "$VMM_PID"; fi 2>/dev/null
	if [ -n "$AGENT_PID" ]; then kill "$AGENT_PID"; wait "$AGENT_PID"; fi 2>/dev/null
}
on_exit stop_agents

NVRM='NVRM: GPU 0000:00:03.0: RmInitAdapter failed! (0x22:0x65:884)'

echo "== command line: bad input is refused with a message"
expect_rc() { # RC PATTERN ARGS...: exit status and a word of the message
	local want=$1 pattern=$2 rc=0 out; shift 2
	out=$("$AGENT" "$@" 2>&1 </dev/null) || rc=$?
	[ "$rc" -eq "$want" ] || fail "'$*' exited $rc, want $want: $out"
	grep -q -- "$pattern" <<<"$out" || fail "'$*' said '$out', want /$pattern/"
	pass "'$*': exit $want, /$pattern/"
}
expect_rc 0 "Usage" --help
expect_rc 0 "vfhealth-agent [0-9]" --version
expect_rc 2 "probe-interval" --probe-interval 0
expect_rc 2 "probe-window" --probe-window 1x
expect_rc 2 "probe-timeout" --probe-timeout -1
expect_rc 2 "--listen" --listen hvsock:/run/vm.sock
expect_rc 2 "--listen" --listen unix:relative
expect_rc 1 "nvidia-smi" --listen "unix:$T/x.sock" --nvidia-smi "$T/none"
expect_rc 3 "not an endpoint" --query vsock:any
expect_rc 3 "only --timeout" --query unix:/x --kmsg /dev/null
expect_rc 3 "timeout" --query unix:/x --timeout 0
expect_rc 3 "No such file" --query "unix:$T/none.sock"
expect_rc 2 "belongs to --query" --timeout 1
expect_rc 2 "unexpected argument" stray
[ ! -e "$T/x.sock" ] || fail "a refused start left a socket"

mkdir -p "$T/dev" "$T/sys/bus/pci/devices/0000:00:03.0" "$T/sys/bus/pci/devices/0000:00:01.0"
echo 0x8086 > "$T/sys/bus/pci/devices/0000:00:01.0/vendor"
echo 0x10de > "$T/sys/bus/pci/devices/0000:00:03.0/vendor"
mkfifo "$T/kmsg"
cat > "$T/nvidia-smi" <<SMI
#!/bin/sh
[ -e "$T/smi-ok" ]
SMI
chmod +x "$T/nvidia-smi"

"$AGENT" -v --listen "unix:$T/agent.sock" --kmsg "$T/kmsg" --sysfs-root "$T/sys" \
	--nvidia-smi "$T/nvidia-smi" --dev-dir "$T/dev" --probe-interval 0.1 --probe-window 60 \
	--probe-timeout 5 --client-timeout 1 </dev/null >/dev/null 2>"$LOG" &
AGENT_PID=$!
EP=unix:$T/agent.sock

# Answers come from the loop, which starts after the FIFO is open.
wait_until 10 query_is "$EP" 2 || fail "agent never answered unknown (rc $Q_RC: $Q_OUT)"
[ "$Q_OUT" = "unknown
reason: probing" ] || fail "unknown (probing) expected, got '$Q_OUT'"
exec 3>"$T/kmsg"

echo "== userspace records never count"
printf '11,1,1000,-;%s\n12,2,1001,c;%s marker-user\n' "$NVRM" "$NVRM" >&3
wait_until 10 logged "marker-user" || fail "record never consumed"
logged "pri=11 not-kernel" || fail "userspace record not judged not-kernel"
query "$EP"; [ "$Q_RC" -eq 2 ] || fail "userspace record changed the state: $Q_OUT"

echo "== many clients at once (more than the 64 slots), as the sentinel's pool"
"$PEER" concurrent "$T/agent.sock" 100 || fail "concurrent queries"

echo "== kernel record (KERN_CONT flag, dictionary line) -> failed"
printf '4,1227,87669726564,c;%s\n SUBSYSTEM=pci\n DEVICE=+pci:0000:00:03.0\n' "$NVRM" >&3
wait_until 10 query_is "$EP" 1 || fail "never failed (rc $Q_RC: $Q_OUT)"
[ "$Q_OUT" = "failed
$NVRM
rule: RmInitAdapter failed!" ] || fail "unexpected answer '$Q_OUT'"

echo "== probe success -> ok"
touch "$T/smi-ok"
wait_until 10 query_is "$EP" 0 || fail "never ok (rc $Q_RC: $Q_OUT)"
[ "$Q_OUT" = ok ] || fail "unexpected answer '$Q_OUT'"

echo "== a later failure record does not replace ok"
printf '3,1300,87700000000,-;NVRM: GPU 0000:00:03.0: RmInitAdapter failed! (0x24:0x65:1437) marker-late\n' >&3
wait_until 10 logged "marker-late" || fail "late record never consumed"
query "$EP"; [ "$Q_RC" -eq 0 ] || fail "ok was replaced: $Q_OUT"

echo "== the FIFO's writer goes away and comes back"
exec 3>&-
exec 3>"$T/kmsg"
printf '6,1400,87800000000,-;marker-reopen\n' >&3
wait_until 10 logged "marker-reopen" || fail "agent stopped reading after the writer left"

echo "== idle: no wakeups"
wait_until 10 logged "succeeded" || fail "no probe success logged"
before=$(ctxt_switches "$AGENT_PID")
sleep 1 # the measurement window: any wakeup in it is a busy loop
after=$(ctxt_switches "$AGENT_PID")
echo "idle agent: $((after - before)) context switches in 1 s"
[ "$((after - before))" -le 1 ] || fail "idle agent woke up $((after - before)) times in 1 s"

echo "== a second agent on the same socket refuses to start"
rc=0; "$AGENT" --listen "unix:$T/agent.sock" --sysfs-root "$T" 2>"$T/second.log" </dev/null || rc=$?
[ "$rc" -eq 1 ] && grep -q "Address already in use" "$T/second.log" ||
	fail "second agent: rc $rc: $(cat "$T/second.log")"
query "$EP"; [ "$Q_RC" -eq 0 ] || fail "first agent disturbed: rc $Q_RC"

echo "== hostile clients"
"$PEER" abuse "$T/agent.sock" "$AGENT_PID" 1 || fail "agent did not hold up"
kill -0 "$AGENT_PID" || fail "agent died"

echo "== hybrid vsock through a fake VMM"
"$PEER" vmm "$T/vmm.sock" "$T/agent.sock" 2222 </dev/null >/dev/null 2>"$T/vmm.log" &
VMM_PID=$!
wait_until 10 test -S "$T/vmm.sock" || fail "fake VMM did not start"
query "hvsock:$T/vmm.sock"
[ "$Q_RC" -eq 0 ] && [ "$Q_OUT" = ok ] || fail "hvsock query: rc $Q_RC: $Q_OUT"
query "hvsock:$T/vmm.sock:2222"
[ "$Q_RC" -eq 0 ] || fail "hvsock query with port: rc $Q_RC: $Q_OUT"
query "hvsock:$T/vmm.sock:5000"
[ "$Q_RC" -eq 3 ] || fail "a port nobody listens on answered: rc $Q_RC: $Q_OUT"
grep -q "CONNECT 5000" "$T/vmm.log" || fail "the VMM never saw CONNECT 5000"

echo "== clean shutdown"
kill -TERM "$AGENT_PID"
rc=0; wait "$AGENT_PID" || rc=$?
AGENT_PID=
[ "$rc" -eq 0 ] || fail "agent exited $rc on SIGTERM"
[ ! -e "$T/agent.sock" ] || fail "socket left behind"

echo "== a socket left by a killed agent is replaced"
"$AGENT" --listen "unix:$T/agent.sock" --sysfs-root "$T" </dev/null >/dev/null 2>&1 &
AGENT_PID=$!
wait_until 10 query_is "$EP" 2 || fail "agent did not start"
kill -KILL "$AGENT_PID"; wait "$AGENT_PID" || true
AGENT_PID=
[ -S "$T/agent.sock" ] || fail "expected a stale socket"

echo "== no NVIDIA device: always unknown, even with a failure in the log"
rm "$T/sys/bus/pci/devices/0000:00:03.0/vendor"
printf '3,1,1,-;%s\n' "$NVRM" > "$T/kmsg-file"
"$AGENT" -v --listen "unix:$T/agent.sock" --kmsg "$T/kmsg-file" --sysfs-root "$T/sys" \
	--nvidia-smi "$T/nvidia-smi" --probe-interval 0.1 </dev/null >/dev/null 2>"$LOG" &
AGENT_PID=$!
wait_until 10 query_is "$EP" 2 || fail "no-device agent answered rc $Q_RC: $Q_OUT"
[ "$Q_OUT" = "unknown
reason: no_device" ] || fail "unknown (no_device) expected, got '$Q_OUT'"
logged "no NVIDIA PCI device" || fail "no-device not logged"
! logged "probe: attempt" || fail "probe ran without a device"

echo "PASS"
