#!/usr/bin/env bash
# test-claim-release.sh - releases are whole and repeatable, and every
# refusal says why to its writer (fs/claims.h; vfhealth(5), assignments/):
#  1. `release=AT` and `ended=crash` in two write(2)s (bash's echo, checked
#     with strace when it is installed) and in one (dash's) record the crash,
#     as the history and the suspect state show;
#  2. a release of a claim already released with that claimed_at succeeds
#     again, by `echo >` (the claim gone) and through an open file, whose
#     outcome says so; a claimed_at never claimed is ENOENT;
#  3. the outcome of a refusal or a release is read back through the same
#     open file: `exec 3<>claim; echo ... >&3; cat <&3`, and pread(2) at 0
#     after a duplicate's close (Python);
#  4. EBUSY at create names, in the log, the instance holding the VF, the
#     operator's hold, a quarantine and a draining GPU;
#  5. a reservation completed through its own open file is never logged as
#     unwatched; a claim left without agent= is, once.
source "$(dirname "$0")/lib.sh"
require_fuse
require_cmd dash python3
fake_sysfs 0000:41:00.4 0000:41:00.5 0000:41:00.6
start_daemon

make_vfs V W X
ended() { # VF INSTANCE CLAIMED_AT: how that claim ended, from VF/history
	awk -v i="$2" -v a="$3" '$1 == a && $2 == "claim" && $3 == i { print $5 }' "$MNT/$1/history"
}

# --- 1. bash's two writes and dash's one: the crash is recorded
for sh in bash dash; do
	put "$V/assignments/vm-$sh" "pid=$$"
	AT=$(claim_stamp "$V/assignments/vm-$sh")
	case $sh in
	bash) bash -c 'echo -e "release=$1\nended=crash" > "$2"' bash "$AT" "$V/assignments/vm-$sh" ;;
	dash) dash -c 'echo "release=$1\nended=crash" > "$2"' dash "$AT" "$V/assignments/vm-$sh" ;;
	esac
	[[ ! -e $V/assignments/vm-$sh ]] || fail "$sh's release left the claim"
	assert_eq "$(ended 0000:41:00.4 "vm-$sh" "$AT")" "ended=crashed" "how $sh's crash release ended"
	assert_cat "$V/state" suspect # died within the init window
	put "$V/quarantined" 0        # clears the suspicion
done
if command -v strace >/dev/null; then
	put "$V/assignments/vm-s" "pid=$$"
	AT=$(claim_stamp "$V/assignments/vm-s")
	strace -f -e trace=write -o "$T/strace" bash -c 'echo -e "release=$1\nended=crash" > "$2"' bash "$AT" "$V/assignments/vm-s"
	assert_eq "$(grep -c 'write(1, "\(release=\|ended=crash\)' "$T/strace")" 2 "bash's write(2)s of a two-line release"
	assert_eq "$(ended 0000:41:00.4 vm-s "$AT")" "ended=crashed" "how the traced release ended"
	put "$V/quarantined" 0
fi

# --- 2. repeated: done again, by the shell's create and through an open file
put "$V/assignments/vm-r" "pid=$$"
AT=$(claim_stamp "$V/assignments/vm-r")
put "$V/assignments/vm-r" "release=$AT"
put "$V/assignments/vm-r" "release=$AT" # the claim is gone: O_CREAT, then the release
bash -c 'echo -e "release=$1\nended=crash" > "$2"' bash "$AT" "$V/assignments/vm-r"
exec 3<>"$V/assignments/vm-r"
echo "release=$AT" >&3
assert_eq "$(cat <&3)" "already released $AT ended=released-if" "the outcome of a repeated release"
exec 3>&-
assert_eq "$(ls "$V/assignments")" "" "claims after repeated releases"
grep -qx 0000:41:00.4 "$MNT/allocatable" || fail "the VF is not allocatable after repeated releases"
expect_err "$ENOENT" put "$V/assignments/vm-r" "release=2026-11-29T05:00:00Z"

# --- 3. outcomes through the descriptor
put "$V/assignments/vm-o" "pid=$$"
AT=$(claim_stamp "$V/assignments/vm-o")
exec 3<>"$V/assignments/vm-o"
echo "release=$AT" >&3
assert_eq "$(cat <&3)" "released $AT" "the outcome of a release"
exec 3>&-
exec 3<>"$V/assignments/vm-o" # created anew: a reservation
if echo "colour=blue" >&3 2>/dev/null; then fail "a bad line was accepted"; fi
assert_match "$(cat <&3)" "^refused EINVAL: the keys are " "the outcome of a bad line"
exec 3>&-
exec 3<>"$V/assignments/vm-o"
echo "agent=vsock:9" >&3 # not whole: its VMM is missing
assert_match "$(cat <&3)" "^refused EINVAL: not whole yet: a claim naming agent= names its VMM too" \
	"the outcome of a claim not whole"
echo "pid=$$" >&3 # now it is: committed, and the claim reads again
assert_match "$(cat <&3)" $'^claimed_at=.*\nagent=vsock:9:2222\n' "a committed claim read through its open file"
exec 3>&-
unclaim "$V/assignments/vm-o"
python3 - "$V/assignments/vm-p" <<'EOF' || fail "the outcome through pread"
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
os.write(fd, b"pid=%d\n" % os.getpid())
os.close(os.dup(fd))                      # commits the claim
claim = os.pread(fd, 4096, 0).decode()
at = [l[11:] for l in claim.splitlines() if l.startswith("claimed_at=")][0]
os.close(fd)
fd = os.open(sys.argv[1], os.O_RDWR)
os.write(fd, b"release=2026-11-29T05:00:00Z\n")
try:
    os.close(os.dup(fd))
    sys.exit("a release of a claim never made succeeded")
except OSError as e:
    assert e.errno == 116, e               # ESTALE: another claim lives
out = os.pread(fd, 4096, 0).decode()
assert out.startswith("refused ESTALE: "), out
os.close(fd)
fd = os.open(sys.argv[1], os.O_RDWR)
os.write(fd, ("release=%s\n" % at).encode())
os.close(os.dup(fd))
assert os.pread(fd, 4096, 0).decode() == "released %s\n" % at
os.close(fd)
EOF

# --- 4. EBUSY at create: the log says why
busy() { # FILE REASON: the create fails EBUSY and the log names REASON
	expect_err "$EBUSY" touch "$1"
	wait_for 10 "the reason '$2'" grep -q "claim by instance ${1##*/} refused (Device or resource busy): $2" "$DAEMON_LOG"
}
touch "$V/assignments/vm-a"
busy "$V/assignments/vm-b" "claimed by instance vm-a"
put "$W/quarantined" 1
busy "$W/assignments/vm-c" "the VF is held"
put "$W/quarantined" 0
put "$MNT/threshold" 1
put "$W/report" "failed vm-0 2026-11-29T07:00:00Z x"
assert_cat "$W/state" quarantined
busy "$W/assignments/vm-d" "the VF is quarantined"
put "$W/quarantined" 0
echo 1 >"$MNT/gpus/0000:41:00.0/drain"
assert_cat "$MNT/gpus/0000:41:00.0/state" draining # vm-a lives on .4
busy "$X/assignments/vm-e" "its GPU 0000:41:00.0 is draining"
echo 0 >"$MNT/gpus/0000:41:00.0/drain"
unclaim "$V/assignments/vm-a"

# --- 5. the unwatched notice: only for what the last close left
exec 7>"$X/assignments/vm-w"
echo "pid=$$" >&7 # a whole claim at this close: committed
echo "agent=vsock:44" >&7
exec 7>&-
exec 7>"$W/assignments/vm-w2"
echo "pid=$$" >&7
exec 7>&-
wait_for 10 "the notice for vm-w2" grep -q 'claim of instance vm-w2 is unwatched' "$DAEMON_LOG"
assert_eq "$(grep -c 'claim of instance vm-w is unwatched' "$DAEMON_LOG")" 0 "notices for a completed reservation"
assert_eq "$(grep -c 'claim of instance vm-w2 is unwatched' "$DAEMON_LOG")" 1 "notices for a claim left unwatched"
stop_daemon
