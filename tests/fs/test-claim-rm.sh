#!/usr/bin/env bash
# test-claim-rm.sh - rm never releases a running VM (fs/claims.h,
# claims_unlink; vfhealth(5), assignments/):
#  1. a claim whose pid= runs (a real process, its start time recorded) and
#     a claim with control= alone whose socket listens survive rm, `rm -rf
#     VF` and `rm -rf MNT/*`: EBUSY, the log says how to release them, their
#     VFs stay out of allocatable;
#  2. release=CLAIMED_AT still releases them;
#  3. once the process is killed (SIGKILL, reaped) rm releases its claim; a
#     control= claim alone is refused also once nothing listens and its
#     socket file is gone (a VMM still starting binds it later);
#  4. a bare claim and a reservation (create, no write yet) are removed.
source "$(dirname "$0")/lib.sh"
require_fuse
require_cmd python3
start_daemon

make_vfs V W X
allocatable_has() { grep -qx "${1##*/}" "$MNT/allocatable"; }

# The stand-in VMMs: a real process, and a real listening socket.
sleep 600 &
VMM=$!
BG_PIDS+=("$VMM")
CTL=$T/vm-2.ctl # in the test's socket directory (SOCKET_DIRS)
background python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen()
time.sleep(600)' "$CTL"
LISTENER=${BG_PIDS[-1]}
wait_for 10 "the control socket" test -S "$CTL"

put "$V/assignments/vm-1" "pid=$VMM"
put "$W/assignments/vm-2" "control=$CTL"
AT1=$(claim_stamp "$V/assignments/vm-1")
AT2=$(claim_stamp "$W/assignments/vm-2")

# --- 1. rm, rm -rf VF, rm -rf everything: EBUSY, nothing released
expect_err "$EBUSY" rm "$V/assignments/vm-1"
expect_err "$EBUSY" rm -f "$W/assignments/vm-2"
grep -q "rm of 0000:41:00.4/assignments/vm-1 refused (uid 0, pid [0-9]*): its VMM (pid= with the recorded start time) runs; release it once its VMM is gone: echo release=$AT1 > 0000:41:00.4/assignments/vm-1" \
	"$DAEMON_LOG" || fail "the refusal of rm does not say how to release: $(grep 'rm of' "$DAEMON_LOG")"
grep -q "rm of 0000:41:00.5/assignments/vm-2 refused .*named by control= alone" "$DAEMON_LOG" ||
	fail "the refusal of rm of a control= claim is not logged"
if rm -rf "$V" "$W" 2>/dev/null; then fail "rm -rf of claimed VFs succeeded"; fi
if rm -rf "${MNT:?}"/* 2>/dev/null; then fail "rm -rf of the whole mount succeeded"; fi
assert_eq "$(claim_stamp "$V/assignments/vm-1")" "$AT1" "the running VMM's claim after rm -rf"
assert_eq "$(claim_stamp "$W/assignments/vm-2")" "$AT2" "the listening VMM's claim after rm -rf"
assert_eq "$(cat "$MNT/claims")" "0000:41:00.4 vm-1"$'\n'"0000:41:00.5 vm-2" "claims after rm -rf"
! allocatable_has "$V" || fail "a running VM's VF is allocatable after rm -rf"
! allocatable_has "$W" || fail "a listening VM's VF is allocatable after rm -rf"

# --- 2. the manager's conditional release still works
put "$V/assignments/vm-1" "release=$AT1"
[[ ! -e $V/assignments/vm-1 ]] || fail "release= left the claim"
put "$V/assignments/vm-1" "pid=$VMM"

# --- 3. the VMM gone: rm releases
kill -KILL "$VMM"
wait "$VMM" 2>/dev/null || true
rm "$V/assignments/vm-1"
allocatable_has "$V" || fail "the VF of a dead VMM's removed claim is not allocatable"
kill -KILL "$LISTENER"
wait "$LISTENER" 2>/dev/null || true
test -S "$CTL" || fail "SIGKILL removed the socket file"
expect_err "$EBUSY" rm "$W/assignments/vm-2" # a socket file left behind: unknown
rm -f "$CTL"
expect_err "$EBUSY" rm "$W/assignments/vm-2" # no socket: maybe not bound yet
put "$W/assignments/vm-2" "release=$AT2"
assert_eq "$(cat "$MNT/claims")" "" "claims after the VMMs are gone"

# --- 4. no VMM named: a bare claim, a reservation
touch "$V/assignments/vm-3"
rm "$V/assignments/vm-3"
exec 7>"$V/assignments/vm-4" # reserved: this open has not written yet
rm "$V/assignments/vm-4"
if echo "pid=$$" >&7 2>/dev/null && exec 7>&-; then fail "a removed reservation was committed"; fi
exec 7>&- 2>/dev/null || true
assert_eq "$(cat "$MNT/claims")" "" "claims after removing a bare claim and a reservation"
stop_daemon
