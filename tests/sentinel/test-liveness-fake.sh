#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Liveness and the conditional release with the sentinel reading a fake /proc (--proc-root):
#  - a pid that runs but now has another start time than the daemon
#    recorded (a reused pid) is dead, though a socket listens on its path;
#  - a pid whose stat cannot be read is uncertain: kept, warned once,
#    counted every pass;
#  - the conditional release: a claim released and made again between
#    reconcile's re-read and its release survives (ESTALE).  A process's stat
#    is a FIFO here, so the test holds reconcile between the two.
source "$(dirname "$0")/lib.sh"

P=$T/proc
mkdir -p "$P/sys/kernel/random"
cp /proc/sys/kernel/random/boot_id "$P/sys/kernel/random/boot_id"

start_sleeper REUSED
start_sleeper UNREADABLE
start_sleeper RACER
# REUSED: start time 1 (the daemon records the real one); a socket listens
# on its control path, in its namespace.
mkdir -p "$P/$REUSED/ns"
printf '%s (sleep) S %s1 0\n' "$REUSED" "$(printf '0 %.0s' {4..21})" >"$P/$REUSED/stat"
ln -s "/proc/$REUSED/ns/net" "$P/$REUSED/ns/net"
start_vmm reused --never-answer
# UNREADABLE: its stat is a directory (read fails with EISDIR).
mkdir -p "$P/$UNREADABLE/stat"
mkdir -p "$P/$RACER"
mkfifo "$P/$RACER/stat"

A=0000:41:00.4
B=0000:41:00.5
R=0000:41:00.6
start_daemon --debug --poll-interval 3600 --reconcile-interval 0.2 --proc-root "$P"
register_vf "$A"
register_vf "$B"
register_vf "$R"

claim "$A" reused "control=$T/reused.ctl" "pid=$REUSED"
# The real start time is recorded; a loaded machine may let two reconcile
# passes release the claim before this read (they do because the recorded
# start time is not the fake one: the release reason below says so).
if content=$(cat "$MNT/$A/assignments/reused" 2>/dev/null); then
	grep -q "^pid_starttime=[1-9]" <<<"$content" || fail "no start time recorded: $content"
fi
claim "$B" uncertain "control=$T/uncertain.ctl" "pid=$UNREADABLE"
wait_for 20 "the reused pid's claim released" test ! -e "$MNT/$A/assignments/reused"
grep -q "vf $A: released the claim of reused .*pid reused by another process" "$T/daemon.log" ||
	fail "release reason not logged"
wait_for 20 "uncertain checks" metric_ge vfhealth_sentinel_liveness_uncertain_total 3
[[ -f $MNT/$B/assignments/uncertain ]] || fail "the uncertain claim was released"
# Warned once, not once per pass.
[[ $(grep -c "^<4>.*vf $B: keeping the claim of uncertain .*process cannot be checked" "$T/daemon.log") == 1 ]] ||
	fail "not exactly one warning for the uncertain claim"

# The release race.  Each reconcile pass reads the racer's (FIFO) stat once
# for this claim, after its re-read of the claim; the test holds reconcile
# there.  The stat it is fed names another start time: the pid was reused.
RACER_STAT=$(printf '%s (sleep) S %s1 0' "$RACER" "$(printf '0 %.0s' {4..21})")
feed() { timeout 20 sh -c 'printf "%s\n" "$1" >"$2"' sh "$RACER_STAT" "$P/$RACER/stat" || fail "reconcile does not read the racer's stat"; }
claim "$R" vm-r "pid=$RACER"
OLD=$(claimed_at "$R" vm-r)
feed # pass 1: dead (once)
wait_for 20 "the first dead verdict" grep -q "vf $R: the VMM of vm-r .* looks dead" "$T/daemon.log"
# Pass 2 re-reads the claim, then waits for the stat: make the claim anew.
wait_for 20 "the re-read before release" grep -q "vf $R: the claim of vm-r looked dead at the last reconcile; judging it again" "$T/daemon.log"
release "$R" vm-r
claim "$R" vm-r "pid=$RACER"
NEW=$(claimed_at "$R" vm-r)
[[ $OLD != "$NEW" ]] || fail "re-claim kept claimed_at"
RELEASED=$(metric vfhealth_sentinel_claims_released_total)
feed # pass 2: dead again: release=OLD, refused
wait_for 20 "the refused release" grep -q "vf $R: the claim of vm-r was released and made again since $OLD: kept" "$T/daemon.log"
[[ $(claimed_at "$R" vm-r) == "$NEW" ]] || fail "the new claim was released"
[[ $(metric vfhealth_sentinel_claims_released_total) == "$RELEASED" ]] || fail "counted a release"
# The new claim is dead too and goes within two passes of its own (so the
# release above was refused, not skipped).  From here the stat is a regular
# file; a pass may be waiting in open(2) of the FIFO already: holding the
# FIFO open both ways lets it through, and it reads the stat and EOF once we
# close.
exec 8<>"$P/$RACER/stat"
printf '%s\n' "$RACER_STAT" >"$P/$RACER/stat.new"
mv "$P/$RACER/stat.new" "$P/$RACER/stat"
printf '%s\n' "$RACER_STAT" >&8
exec 8>&-
wait_for 20 "the new dead claim released" test ! -e "$MNT/$R/assignments/vm-r"
[[ -f $MNT/$B/assignments/uncertain ]] || fail "the uncertain claim was released"
echo PASS
