#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The reader memory budget (fs/budget.h): what the open files of
# one uid hold in the daemon is bounded by READER_BUDGET_PER_UID (32 MiB),
# and of every uid but root by READER_BUDGET_TOTAL (128 MiB).  An
# unprivileged user who opens a 1 MB `failures` file hundreds of times and
# reads one byte from each gets ENOBUFS once its budget is spent, the
# daemon's memory stays within the budget, the log says why once, and other
# users (and root) still read.
source "$(dirname "$0")/lib.sh"
require_fuse
require_cmd setpriv:util-linux

ENOBUFS="No buffer space available"
PER_UID=$((32 * 1024 * 1024))
V=$MNT/0000:41:00.4
# Freed memory must not linger in ASan's quarantine: RSS is what is measured.
DAEMON_ENV=("ASAN_OPTIONS=$ASAN_OPTIONS:quarantine_size_mb=1:thread_local_quarantine_size_kb=64")

rss_kib() {
	awk '/^VmRSS:/ { print $2 }' "/proc/$DAEMON_PID/status"
}

# hold UID COUNT: UID opens $V/failures COUNT times and reads one byte from
# each, keeping them open (its stdin never ends) until release UID kills it.
# Sets HELD and HOLD_ERROR.
declare -A HOLDER
exec {never_ends}<> <(:)
hold() {
	local uid=$1 out=$T/hold-$1.out
	# setpriv, not as_user: $! must be vftool itself (setpriv execs it).
	background setpriv --reuid="$uid" --regid="$uid" --clear-groups "$VFTOOL" hold "$V/failures" "$2" <&"$never_ends" >"$out"
	HOLDER[$uid]=$!
	wait_for 60 "uid $uid holding" grep -qx holding "$out"
	HELD=$(sed -n 's/^held //p' "$out")
	HOLD_ERROR=$(sed -n 's/^error //p' "$out")
}
release() {
	kill "${HOLDER[$1]}"
	wait "${HOLDER[$1]}" || true
}

start_daemon
mkdir "$V"
put "$MNT/threshold" 1000
# A big failures file: 1000 failures with 1000-byte messages (about 1 MB).
msg=$(printf 'x%.0s' {1..1000})
exec 3>>"$V/report"
for i in $(seq 1 1000); do
	/usr/bin/printf 'failed vm-%d - %s\n' "$i" "$msg" >&3
done
exec 3>&-
assert_cat "$V/tally" 1000
size=$(cat "$V/failures" | wc -c)
((size > 1000000)) || fail "failures is only $size bytes"

# --- one uid: bounded by its own budget; others still read
before=$(rss_kib)
hold 65534 300
assert_eq "$HOLD_ERROR" "$ENOBUFS" "uid 65534's error once its budget is spent"
per_open=$((size + 1024))
((HELD >= PER_UID / per_open - 2 && HELD <= PER_UID / size)) ||
	fail "uid 65534 held $HELD opens of $size bytes; its budget is $PER_UID bytes"
grown=$(($(rss_kib) - before))
# The budget plus what requests in flight render (a few copies of the file);
# without a budget 300 opens would take 300 MB.
((grown * 1024 < PER_UID + 16 * size)) ||
	fail "vfhealthd grew by $grown KiB holding $HELD opens (budget $PER_UID bytes)"
echo "uid 65534 held $HELD opens of $size bytes; vfhealthd grew by $grown KiB"
# Further opens and reads by that uid get ENOBUFS ...
expect_err "$ENOBUFS" as_user 65534 cat "$V/failures"
# ... while another user, root and a listing still work.
assert_eq "$(as_user 65533 cat "$V/failures" | wc -c)" "$size" "uid 65533 reads failures"
assert_eq "$(cat "$V/failures" | wc -c)" "$size" "root reads failures"
as_user 65533 ls "$MNT" >/dev/null || fail "uid 65533 cannot list"
assert_eq "$(grep -c 'reader budget of uid 65534 spent' "$DAEMON_LOG")" 1 "log lines about uid 65534"
release 65534
# The kernel releases the files once the holder exits: the budget is given back.
wait_for 30 "uid 65534's budget given back" as_user 65534 cat "$V/failures" >/dev/null

# --- every unprivileged uid together: bounded by the total; root still reads
for uid in 65530 65531 65532 65533; do
	hold "$uid" 300
	assert_eq "$HOLD_ERROR" "$ENOBUFS" "uid $uid's error"
done
hold 65529 300
assert_eq "$HOLD_ERROR" "$ENOBUFS" "uid 65529's error once the total is spent"
((HELD < 4)) || fail "uid 65529 held $HELD opens past the total"
grep -q 'reader budget of all users spent' "$DAEMON_LOG" || fail "the spent total is not logged"
assert_eq "$(cat "$V/failures" | wc -c)" "$size" "root reads failures with the total spent"
assert_cat "$MNT/quarantined" "$(basename "$V")"
for uid in 65529 65530 65531 65532 65533; do release "$uid"; done
wait_for 30 "the total given back" as_user 65529 cat "$V/failures" >/dev/null
stop_daemon
echo "ok"
