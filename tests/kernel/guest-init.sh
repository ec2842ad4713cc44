#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/kernel/guest-init.sh - /init of the guest that tests/kernel/kernel.sh
# boots.  Runs the checks inside a real kernel and prints one "VFHK: ..." line
# per step on the serial console (BEGIN, PASS name, FAIL reason, END PASS);
# the host parses them.  Then powers off.
#
# What it proves, in this kernel:
#   1. a userspace "<3>NVRM: ... RmInitAdapter failed!" written to /dev/kmsg
#      (filed under LOG_USER by the kernel) is never counted: still unknown;
#   2. the same line printed by a kernel module (facility 0) turns the agent
#      FAILED, with that line as the message and the built-in rule; a line
#      only a loaded rule knows (GSP) turns it FAILED by that rule;
#   3. vfhealthd's sentinel, in this guest, reaches the agent over AF_VSOCK
#      by CID (vsock_loopback: CID 1 is the local machine);
#   4. two failed assignments quarantine the VF, a claim is then refused
#      (EBUSY), and the agent's OK for the triggering assignment lifts it.
#      There is no nvidia-smi in this guest: OK comes from the device probe
#      (stand-in nodes appear under /run/nvdev when the "GPU comes up").
# Every wait is on a condition with a deadline.

/bin/busybox mount -t devtmpfs dev /dev
exec >/dev/console 2>&1 </dev/null
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
ln -s /proc/self/mounts /etc/mtab

say() { echo "VFHK: $*"; }
halt() {
	sync
	poweroff -f
	sleep 10
}
fail() {
	say "FAIL $*"
	for log in /tmp/*.log; do
		[ -f "$log" ] || continue
		echo "--- $log (last 30 lines) ---"
		tail -n 30 "$log"
	done
	halt
}

TIMEOUT=$(sed -n 's/.*vfhk\.timeout=\([0-9]*\).*/\1/p' /proc/cmdline)
(sleep "${TIMEOUT:-120}" && fail "guest deadline of ${TIMEOUT:-120}s passed") &

# wait_for SECONDS WHAT CMD...: retry CMD (every 0.1 s) until it succeeds.
wait_for() {
	limit=$1 what=$2
	shift 2
	end=$(($(date +%s) + limit))
	until "$@"; do
		[ "$(date +%s)" -lt "$end" ] || fail "timed out after ${limit}s waiting for: $what"
		sleep 0.1
	done
}

echo # the firmware's escape sequences end without a newline
say "BEGIN $(uname -r)"
while read -r m; do
	insmod "/lib/modules/$m.ko" || fail "insmod $m"
done </lib/modules/order
[ -c /dev/fuse ] || fail "no /dev/fuse after loading fuse"

# An NVIDIA device as the agent sees it; its device nodes appear later.
mkdir -p /fakesys/bus/pci/devices/0000:00:03.0 /run/nvdev
echo 0x10de >/fakesys/bus/pci/devices/0000:00:03.0/vendor
cat >/run/rules <<'EOF'
# a shape the built-in rule does not know
failure GSP firmware init failed
EOF

export ASAN_OPTIONS=detect_leaks=0
PORT=2222
EP=vsock:1:$PORT
ALOG=/tmp/agent.log
vfhealth-agent -v --listen "vsock:any:$PORT" --kmsg /dev/kmsg --sysfs-root /fakesys \
	--dev-dir /run/nvdev --rules /run/rules --probe-interval 0.5 2>"$ALOG" &

# query: the agent's answer over AF_VSOCK by CID; sets Q_RC and Q_OUT.
query() {
	Q_RC=0
	Q_OUT=$(vfhealth-agent --query "$EP" --timeout 5 2>&1) || Q_RC=$?
}
query_is() { query; [ "$Q_RC" -eq "$1" ]; }

wait_for 30 "the agent answering over vsock:1" query_is 2
[ "$Q_OUT" = "unknown
reason: probing" ] || fail "want unknown, probing: $Q_OUT"
say "PASS vsock-query: unknown (probing) over AF_VSOCK CID 1"

# 1. A userspace write of the driver's line: LOG_USER, never counted.
LINE='NVRM: GPU 0000:41:00.4: RmInitAdapter failed! (0x22:0x38:891)'
echo "<3>$LINE" >/dev/kmsg
echo "<3>vfhk-mark-1" >/dev/kmsg
wait_for 20 "the agent reading the marker" grep -qF "vfhk-mark-1" "$ALOG"
grep -F "not-kernel: $LINE" "$ALOG" | grep -q "pri=11 " ||
	fail "the userspace NVRM line was not judged a LOG_USER record"
query
[ "$Q_RC" -eq 2 ] || fail "a userspace NVRM line changed the answer: rc $Q_RC: $Q_OUT"
say "PASS userspace-ignored: <3>NVRM from userspace is pri=11, agent unknown"

# 2. The kernel prints it (the module): FAILED with that line.
insmod /lib/modules/vfh_nvrm.ko || fail "insmod vfh_nvrm"
wait_for 20 "the agent FAILED" query_is 1
[ "$Q_OUT" = "failed
$LINE
rule: RmInitAdapter failed!" ] || fail "failed without the kernel's line and rule: $Q_OUT"
grep -F "match: $LINE" "$ALOG" | grep -q "pri=3 " || fail "the module's record was not pri=3"
say "PASS kernel-record: the module's pr_err turned the agent failed"

rmmod vfh_nvrm || fail "rmmod vfh_nvrm"
GSP='NVRM: GPU 0000:41:00.4: GSP firmware init failed (0x62)'
insmod /lib/modules/vfh_nvrm.ko "line=\"${GSP#NVRM: }\"" || fail "insmod vfh_nvrm line=GSP"
answer_is_gsp() {
	query
	[ "$Q_OUT" = "failed
$GSP
rule: GSP firmware init failed" ]
}
wait_for 20 "failed by the loaded GSP rule" answer_is_gsp
say "PASS loaded-rule: a GSP line from the kernel matched the rules file"

# 3 and 4. vfhealthd and its sentinel in this guest, polling over vsock.
DLOG=/tmp/daemon.log
MNT=/mnt
VF=0000:41:00.4
# The VMM's sockets live in /run here: that is the socket directory.
vfhealthd -f --db /run/db/vfhealth.db --socket-dir /run --threshold 2 --poll-interval 0.2 --poll-timeout 5 \
	--no-reconcile "$MNT" >"$DLOG" 2>&1 &
wait_for 30 "vfhealthd mounted" test -f "$MNT/status"
mkdir "$MNT/$VF" || fail "cannot register $VF"
test-vmm --hvsock /run/ctl.hv --control /run/ctl.ctl --never-answer >/tmp/vmm.log 2>&1 &
wait_for 20 "test-vmm's control socket" test -S /run/ctl.ctl

# claim ID: create, then agent= and control= in one write(2).
claim() {
	touch "$MNT/$VF/assignments/$1" || return 1
	printf 'agent=%s\ncontrol=/run/ctl.ctl\n' "$EP" >/tmp/claim
	cat /tmp/claim >"$MNT/$VF/assignments/$1"
}
file_is() { [ "$(cat "$1")" = "$2" ]; }
# release ID: by its claimed_at, as its manager does (rm refuses a claim
# naming control= alone: its VMM may bind the socket later)
release() {
	at=$(sed -n 's/^claimed_at=//p' "$MNT/$VF/assignments/$1") && [ -n "$at" ] &&
		echo "release=$at" >"$MNT/$VF/assignments/$1"
}
metric() { awk -v n="$1" '$1 == n { print $2 }' "$MNT/metrics"; }

claim vm-1 || fail "claim vm-1"
wait_for 30 "tally 1 (the sentinel's failed check over vsock)" file_is "$MNT/$VF/tally" 1
grep -qF "vm-1 " "$MNT/$VF/failures" && grep -qF "${GSP#NVRM: }" "$MNT/$VF/failures" ||
	fail "vm-1's failure (the GSP line) not recorded: $(cat "$MNT/$VF/failures")"
say "PASS sentinel-vsock: vfhealthd's sentinel read the agent's failure over AF_VSOCK"

release vm-1 || fail "release vm-1"
claim vm-2 || fail "claim vm-2 (not quarantined yet)"
wait_for 30 "quarantine after the second failed assignment" file_is "$MNT/$VF/quarantined" 1
file_is "$MNT/quarantined" "$VF" || fail "top-level quarantined does not list $VF"
say "PASS quarantine: two failed assignments quarantined $VF"

if touch "$MNT/$VF/assignments/vm-3" 2>/tmp/claim.err; then
	fail "a claim of a quarantined VF was accepted"
fi
grep -q "busy" /tmp/claim.err || fail "claim refused, but not with EBUSY: $(cat /tmp/claim.err)"
say "PASS claim-refused: EBUSY"

# The success path: the guest's GPU comes up (its device nodes open; no
# nvidia-smi here), the agent answers ok, the sentinel reports ok for vm-2,
# the quarantine is lifted.
: >/run/nvdev/nvidiactl
: >/run/nvdev/nvidia0
wait_for 30 "the agent OK" query_is 0
wait_for 30 "the quarantine lifted" file_is "$MNT/$VF/quarantined" 0
file_is "$MNT/$VF/tally" 0 || fail "tally $(cat "$MNT/$VF/tally") after the success, want 0"
file_is "$MNT/quarantined" "" || fail "top-level quarantined still lists $VF"
release vm-2 || fail "release vm-2"
claim vm-3 || fail "claim vm-3 after the lift"
say "PASS lifted: ok from vm-2 rescinded the quarantine; vm-3 claimed"

v=$(metric 'vfhealth_sentinel_checks_total{result="failed"}')
[ "${v:-0}" -ge 2 ] || fail "failed checks $v, want >= 2"
v=$(metric 'vfhealth_sentinel_quarantines_total')
[ "${v:-0}" -eq 1 ] || fail "quarantines_total $v, want 1"
if grep -l "ERROR: AddressSanitizer\|runtime error:" /tmp/*.log; then
	fail "sanitizer report"
fi
say "END PASS"
halt
