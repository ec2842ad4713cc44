#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# journal.sh - vfhealthd and its sentinel log to the journal, with fields,
# when their stderr is the journal ($JOURNAL_STREAM), and a terminal gets
# lines without the level prefix.  The journal is a datagram socket of the
# test's own at /run/systemd/journal/socket (in a private mount namespace),
# read back field by field (journal-receiver.py: the native protocol, both
# of its forms), so no systemd is needed.  Real vfhealthd, real agents
# behind test-vmm.  Prints one VF's story as the journal holds it.
# Skips (77) without FUSE or where no mount namespace can be made.
set -euo pipefail
if [[ -z ${VFHEALTH_JOURNAL_NS:-} ]]; then
	unshare -m --propagation private true 2>/dev/null ||
		{ echo "1..0 # SKIP cannot make a mount namespace (needs CAP_SYS_ADMIN)"; exit 0; }
	VFHEALTH_JOURNAL_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
here=$(cd "$(dirname -- "$0")" && pwd)
# shellcheck source=../sentinel/lib.sh
source "$here/../sentinel/lib.sh"
require_fuse

# ---- the journal of this test -------------------------------------------------
JOURNAL=$T/journal.jsonl
: >"$JOURNAL"
mount_tmpfs /run/systemd 4M
mkdir /run/systemd/journal
mkfifo "$T/receiver.fifo"
python3 "$here/journal-receiver.py" /run/systemd/journal/socket "$JOURNAL" >"$T/receiver.fifo" &
BG_PIDS+=("$!")
read -r -t 60 line <"$T/receiver.fifo" || line=nothing
[[ $line == bound ]] || fail "the journal receiver did not start ($line)"

# records KEY=VALUE|KEY...: the records with every field given (KEY alone:
# present, whatever its value), one JSON object a line.
records() {
	python3 - "$JOURNAL" "$@" <<'PY'
import json, sys
want = [a.split("=", 1) for a in sys.argv[2:]]
for line in open(sys.argv[1], encoding="utf-8"):
    r = json.loads(line)
    if all(w[0] in r and (len(w) == 1 or r[w[0]] == w[1]) for w in want):
        print(json.dumps(r, sort_keys=True))
PY
}
count() { records "$@" | wc -l; }
has() { (($(count "$@") > 0)); }
# field NAME KEY=VALUE...: NAME of each matching record, one a line.
field() {
	local name=$1
	shift
	records "$@" | python3 -c 'import json,sys
for l in sys.stdin: print(json.loads(l).get(sys.argv[1], "-"))' "$name"
}
# story VF: the VF's events in order, as `journalctl VF=... -o verbose` would
# list them, one line each: EVENT INSTANCE PRIORITY MESSAGE_ID: MESSAGE.
story() {
	records "VF=$1" | python3 -c 'import json,sys
for l in sys.stdin:
    r = json.loads(l)
    if "EVENT" in r:
        print(r["EVENT"], r.get("INSTANCE", "-"), "PRIORITY=" + r["PRIORITY"],
              r["MESSAGE_ID"] + ":", r["MESSAGE"])'
}

check_wellformed() {
	! has _MALFORMED || fail "malformed journal records: $(field _MALFORMED)"
}

# ---- the daemon, its stderr the journal ---------------------------------------
: >"$DAEMON_LOG"
# shellcheck disable=SC2034 # start_daemon reads it
DAEMON_ENV=("JOURNAL_STREAM=$(stat -c '%d:%i' "$DAEMON_LOG")")
VF=0000:41:00.4
mount_tmpfs "$T/db" 4m 0700 # filled below: the store fails closed
# A GPU of a fake sysfs and a recovery program that fails, for the
# recovery events.
PF=0000:43:00.0 VFG=0000:43:00.4
mkdir -p "$T/sys/bus/pci/devices/$PF" "$T/sys/bus/pci/devices/$VFG"
ln -s "../$PF" "$T/sys/bus/pci/devices/$VFG/physfn"
ln -s "../$VFG" "$T/sys/bus/pci/devices/$PF/virtfn0"
echo 0x10de >"$T/sys/bus/pci/devices/$PF/vendor" # an NVIDIA GPU with SR-IOV
echo 16 >"$T/sys/bus/pci/devices/$PF/sriov_totalvfs"
mkdir -m 0755 "$T/bin"
# shellcheck disable=SC2016 # $1 is the program's, not this shell's
printf '#!/bin/sh\necho "sriov-manage -e $1 failed: check nvidia-vgpu-mgr" >&2\nexit 3\n' >"$T/bin/cycle"
chmod 0755 "$T/bin/cycle"
start_daemon --threshold 2 --poll-interval 0.2 --poll-timeout 1 --no-reconcile --agent-grace 1 \
	--sysfs-root "$T/sys" --recover-program "$T/bin/cycle"
register_vf "$VF"
has SYSLOG_IDENTIFIER=vfhealthd PRIORITY=6 "MESSAGE=serving $MNT" ||
	fail "no info record 'serving $MNT' from vfhealthd in the journal"
wait_for 20 "the sentinel's start in the journal" has SYSLOG_IDENTIFIER=vfhealth-sentinel PRIORITY=6

echo "== an agent that does not answer: agent-unreachable, once per change, then agent-answering"
start_vmm g0 # proxies to $T/g0.sock, where no agent listens yet: rpc_error
claim "$VF" vm-0 "agent=hvsock:$T/g0.hv:2222" "control=$T/g0.ctl"
T0=$(claimed_at "$VF" vm-0)
wait_for 20 "agent-unreachable (rpc_error) for vm-0" \
	has EVENT=agent-unreachable "VF=$VF" INSTANCE=vm-0 "CLAIMED_AT=$T0" RESULT=rpc_error PRIORITY=4 \
	MESSAGE_ID=1d44bbd3c541455e9092b3d03afb404d
wait_polls 5
(($(count EVENT=agent-unreachable INSTANCE=vm-0 RESULT=rpc_error) == 1)) ||
	fail "an unchanged rpc_error must be logged once: $(field MESSAGE EVENT=agent-unreachable)"
grep -q "vf $VF: the agent of vm-0 (claimed $T0) has not answered for [0-9]* s: rpc_error" \
	<<<"$(field MESSAGE EVENT=agent-unreachable INSTANCE=vm-0)" ||
	fail "the message must name VF, instance and result: $(field MESSAGE EVENT=agent-unreachable)"
# The agent comes up but cannot tell yet (its nvidia-smi fails): unknown.
start_agent g0
wait_for 20 "agent-unreachable (unknown) for vm-0" \
	has EVENT=agent-unreachable "VF=$VF" INSTANCE=vm-0 RESULT=unknown
agent_make_ok g0
wait_for 20 "agent-answering for vm-0" \
	has EVENT=agent-answering "VF=$VF" INSTANCE=vm-0 RESULT=ok PRIORITY=5
release "$VF" vm-0

echo "== one VF's story, from the first failure to the rescind"
start_failing_guests g1 g2
claim "$VF" vm-1 "agent=hvsock:$T/g1.hv:2222" "control=$T/g1.ctl"
wait_for 20 "tally 1" file_is "$MNT/$VF/tally" 1
release "$VF" vm-1
claim "$VF" vm-2 "agent=hvsock:$T/g2.hv:2222" "control=$T/g2.ctl"
wait_for 20 "quarantine" file_is "$MNT/$VF/quarantined" 1
T2=$(claimed_at "$VF" vm-2)
agent_make_ok g2
wait_for 20 "rescind" file_is "$MNT/$VF/quarantined" 0
wait_polls 2
release "$VF" vm-2
story "$VF" | tee "$T/story"
check_wellformed
# The story in order, each event once, with its fields.
mapfile -t events < <(field EVENT "VF=$VF" EVENT)
want_events=(claimed agent-unreachable agent-unreachable agent-answering released
	     claimed failure-recorded released claimed quarantined rescinded released)
[[ "${events[*]}" == "${want_events[*]}" ]] ||
	fail "VF $VF's events: '${events[*]}', want '${want_events[*]}'"
has EVENT=failure-recorded "VF=$VF" INSTANCE=vm-1 PRIORITY=5 FAILURES=1 THRESHOLD=2 \
	MESSAGE_ID=454761b9e4ba4e04b427153eae2e5d67 ||
	fail "no failure-recorded record with its fields"
grep -q "RmInitAdapter failed!" <<<"$(field REASON EVENT=failure-recorded INSTANCE=vm-1)" ||
	fail "the failure-recorded record lacks the NVRM line"
has EVENT=quarantined "VF=$VF" INSTANCE=vm-2 "CLAIMED_AT=$T2" PRIORITY=3 FAILURES=2 THRESHOLD=2 \
	MESSAGE_ID=f94a40a0a7d54e56abf8aabc9454af4d ||
	fail "no quarantined record at err with its fields"
grep -q "^$VF: quarantined after 2 distinct failed assignments (threshold 2): vm-1, vm-2; last failure: NVRM: .*RmInitAdapter failed!" \
	<<<"$(field MESSAGE EVENT=quarantined "VF=$VF")" ||
	fail "the quarantine's message lacks the instances, the threshold or the NVRM line"
has EVENT=rescinded "VF=$VF" INSTANCE=vm-2 "CLAIMED_AT=$T2" PRIORITY=5 ||
	fail "no rescinded record"
has EVENT=claimed "VF=$VF" INSTANCE=vm-1 PRIORITY=6 WRITER_UID=0 WRITER_PID ||
	fail "no claimed record with its writer"

echo "== a lowered threshold: one quarantine record per VF; holds and clears name their writer"
VF2=0000:41:00.5 VF3=0000:41:00.6
register_vf "$VF2"
register_vf "$VF3"
for vf in "$VF2" "$VF3"; do
	printf 'failed vm-9 - NVRM: GPU 0000:00:05.0: RmInitAdapter failed! (0x22:0x65:884)\n' >"$MNT/$vf/report"
done
echo 1 >"$MNT/threshold"
for vf in "$VF2" "$VF3"; do
	(($(count EVENT=quarantined "VF=$vf" PRIORITY=3 FAILURES=1 THRESHOLD=1) == 1)) ||
		fail "lowering the threshold must log one quarantine of $vf: $(field MESSAGE "VF=$vf")"
	grep -q "^$vf: quarantined after 1 distinct failed assignments (threshold lowered to 1): vm-9; last failure: NVRM: " \
		<<<"$(field MESSAGE EVENT=quarantined "VF=$vf")" ||
		fail "the threshold's quarantine of $vf: $(field MESSAGE EVENT=quarantined "VF=$vf")"
done
has EVENT=threshold-changed PRIORITY=5 || fail "no threshold-changed record"
echo 2 >"$MNT/threshold"
echo 0 >"$MNT/$VF2/quarantined"
echo 1 >"$MNT/$VF3/quarantined"
has EVENT=cleared "VF=$VF2" PRIORITY=5 WRITER_UID=0 || fail "no cleared record with its writer"
has EVENT=held "VF=$VF3" PRIORITY=5 WRITER_UID || fail "no held record with its writer"
# ... and VF/history keeps the hold: who held it, who cleared it.
grep -Eq "^[0-9]{4}-[0-9T:.-]+Z hold by=0 cleared=- cleared_by=-$" "$MNT/$VF3/history" ||
	fail "no live hold in $VF3/history: $(cat "$MNT/$VF3/history")"
echo 0 >"$MNT/$VF3/quarantined"
grep -Eq "^[0-9]{4}-[0-9T:.-]+Z hold by=0 cleared=[0-9]{4}-[0-9T:.-]+Z cleared_by=0$" "$MNT/$VF3/history" ||
	fail "no cleared hold in $VF3/history: $(cat "$MNT/$VF3/history")"
has EVENT=cleared "VF=$VF3" PRIORITY=5 WRITER_UID=0 || fail "no cleared record for $VF3"

echo "== a GPU's failed cycle: started (notice), failed (err), with PARENT and REASON"
[[ -d $MNT/$VFG ]] || fail "$VFG, the fake GPU's VF, is not registered from sysfs"
echo 1 >"$MNT/gpus/$PF/drain"
echo cycle >"$MNT/gpus/$PF/recover"
wait_for 20 "recovery-failed" has EVENT=recovery-failed "PARENT=$PF" PRIORITY=3
has EVENT=recovery-started "PARENT=$PF" PRIORITY=5 || fail "no recovery-started record"
grep -q "^exit 3: sriov-manage -e $PF failed" <<<"$(field REASON EVENT=recovery-failed)" ||
	fail "the failure's REASON: $(field REASON EVENT=recovery-failed)"

echo "== the runbook's and the alerts' journalctl commands find what they promise"
# journalctl [-u UNIT] [-p LEVEL] [FIELD=VALUE...]: this test's journal as
# journalctl prints it (short format: "HOST IDENT: MESSAGE"), filtered the
# way journalctl filters (-u vfhealthd: the daemon and its sentinel, which
# shares its cgroup; -p: that level and more urgent).
journalctl() {
	local max=7 match=() ident='^(vfhealthd|vfhealth-sentinel)$'
	while (($#)); do
		case $1 in
		-u) [[ $2 == vfhealthd ]] || fail "journalctl -u $2: not vfhealthd's unit"; shift 2 ;;
		-p) case $2 in
		    emerg) max=0 ;; alert) max=1 ;; crit) max=2 ;; err) max=3 ;;
		    warning) max=4 ;; notice) max=5 ;; info) max=6 ;; debug) max=7 ;;
		    *) fail "journalctl -p $2: not a level name" ;;
		    esac
		    shift 2 ;;
		*=*) match+=("$1"); shift ;;
		*) fail "journalctl $1: an argument this test does not know" ;;
		esac
	done
	records "${match[@]}" | python3 -c 'import json, re, sys
for l in sys.stdin:
    r = json.loads(l)
    if re.match(sys.argv[1], r.get("SYSLOG_IDENTIFIER", "")) and int(r["PRIORITY"]) <= int(sys.argv[2]):
        print("host %s: %s" % (r["SYSLOG_IDENTIFIER"], r["MESSAGE"]))' "$ident" "$max"
}
# What each command the docs print must find here (an extended regex on
# its output); a command in the docs without a promise here fails, and so
# does a promise whose command left the docs.
declare -A promise=(
	["journalctl -u vfhealthd VF=0000:41:00.4"]="$VF: quarantined after 2 distinct failed assignments .*RmInitAdapter failed!"
	["journalctl -u vfhealthd EVENT=quarantined"]="$VF: quarantined after 2 distinct failed assignments \\(threshold 2\\): vm-1, vm-2; last failure: NVRM"
	["journalctl -u vfhealthd -p err"]="$VF: quarantined after 2 distinct failed assignments"
	["journalctl -u vfhealthd -p warning"]="vfhealth-sentinel: vf $VF: the agent of vm-0 .*rpc_error"
	["journalctl -u vfhealthd EVENT=held"]="$VF3: held by the operator"
	["journalctl -u vfhealthd EVENT=recovery-failed"]="GPU $PF: recovery failed \\(failed\\): exit 3: sriov-manage -e $PF failed"
	["journalctl -u vfhealthd EVENT=agent-unreachable"]="vf $VF: the agent of vm-0 \\(claimed $T0\\) has not answered for [0-9]+ s: (rpc_error|unknown)"
	["journalctl -u vfhealthd | grep -e rpc_error -e unknown"]="vf $VF: the agent of vm-0 \\(claimed $T0\\) has not answered for [0-9]+ s: (rpc_error|unknown)"
)
mapfile -t commands < <(python3 - "$VFHEALTH_SOURCE_ROOT/docs/runbook.md" \
	"$VFHEALTH_SOURCE_ROOT/examples/prometheus/vfhealth.rules.yml" <<'PY'
import re, sys
runbook, rules = open(sys.argv[1]).read(), open(sys.argv[2]).read()
found = set()
for block in re.findall(r"```sh\n(.*?)```", runbook, re.S):
    for line in block.splitlines():
        if line.startswith("journalctl -u vfhealthd"):
            found.add(re.sub(r"\s+#.*$", "", line).rstrip())
# inline ones too (`journalctl -u vfhealthd` alone names the unit's log)
for cmd in re.findall(r"`(journalctl -u vfhealthd [^`]+)`", runbook + rules):
    found.add(cmd)
print("\n".join(sorted(found)))
PY
)
((${#commands[@]} >= 3)) || fail "found only ${#commands[@]} journalctl commands in the docs"
for cmd in "${commands[@]}"; do
	[[ -n ${promise[$cmd]:-} ]] || fail "the docs print '$cmd', which this test does not run"
done
for cmd in "${!promise[@]}"; do
	grep -qxF -- "$cmd" <<<"$(printf '%s\n' "${commands[@]}")" || fail "'$cmd' is no longer in the docs"
	out=$(eval "$cmd") || true
	grep -Eq -- "${promise[$cmd]}" <<<"$out" ||
		fail "'$cmd' does not find /${promise[$cmd]}/ in: $out"
	echo "ok: $cmd"
done

echo "== the store failing closed and serving again: one record each"
dd if=/dev/zero of="$T/db/fill" bs=64k 2>/dev/null || true
printf 'failed vm-10 - NVRM: x\n' >"$MNT/$VF2/report" 2>/dev/null || true
wait_for 20 "store-unavailable" has EVENT=store-unavailable PRIORITY=3 \
	MESSAGE_ID=8f8b09c4f76c4bb7bef8be02cb7c2da9 REASON
rm "$T/db/fill"
echo repair >"$MNT/status" 2>/dev/null || true # or the sentinel's own repair did it
wait_for 20 "store-available" has EVENT=store-available PRIORITY=5
(($(count EVENT=store-unavailable) == 1)) || fail "the store's failure must be one record"

echo "== stderr stayed empty: every record went to the journal"
stop_daemon
! grep -E '^<[0-7]>' "$DAEMON_LOG" || fail "records on stderr although it is the journal"

echo "== --log-target=journal with stderr a file; stderr where no journal is"
: >"$T/other.log"
"$VFHEALTHD" --log-target=journal --threshold 0 2>>"$T/other.log" && fail "--threshold 0 accepted"
has SYSLOG_IDENTIFIER=vfhealthd PRIORITY=3 "MESSAGE=--threshold must be an integer 1..1000, not '0'" ||
	fail "--log-target=journal did not send the refusal to the journal"
[[ ! -s $T/other.log ]] || fail "--log-target=journal wrote to stderr: $(cat "$T/other.log")"
rm /run/systemd/journal/socket
"$VFHEALTHD" --log-target=journal --threshold 0 2>>"$T/other.log" && fail "--threshold 0 accepted"
grep -qx "<3>vfhealthd: --threshold must be an integer 1..1000, not '0'" "$T/other.log" ||
	fail "a record the journal cannot take must reach stderr: $(cat "$T/other.log")"

echo "== stderr: the level prefix on a pipe or file, none on a terminal"
out=$("$VFHEALTHD" --threshold 0 2>&1) && fail "--threshold 0 accepted"
[[ $out == "<3>vfhealthd: --threshold must be an integer 1..1000, not '0'" ]] ||
	fail "on a pipe: '$out'"
out=$(script -qec "$VFHEALTHD --threshold 0" /dev/null </dev/null | tr -d '\r') && fail "--threshold 0 accepted"
[[ $out == "vfhealthd: --threshold must be an integer 1..1000, not '0'" ]] ||
	fail "on a terminal: '$out'"
echo PASS
