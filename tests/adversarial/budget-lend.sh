#!/usr/bin/env bash
# budget-lend.sh - an unprivileged user cannot spend root's reader budget
# (docs/security.md).  She opens `metrics` thousands of times (32 MiB of
# snapshots and more) and hands the descriptors to a root process that
# reads them all (SCM_RIGHTS: what a setuid program reading her stdin
# does).  Every snapshot is charged to her, the opener: her budget is
# spent (those reads get ENOBUFS, the log names her uid), root's is not:
# root still reads every file, and the sentinel (root, reading `claims`)
# still polls.
set -euo pipefail
# shellcheck source=../crash/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../crash/lib.sh"
lend=${LEND_FDS:?LEND_FDS must name lend-fds (set by meson)}
require_fuse
require_cmd setpriv:util-linux

metric() { vf_read "$MNT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
start_daemon --poll-interval 0.1
# 64 VFs make `metrics` about 12 KB: 32 MiB is under 3,000 snapshots.
for i in $(seq 0 63); do
	[[ $(vfio mkdir "$MNT/$(printf '0000:4%x:00.%d' $((i / 8)) $((i % 8)))") == ok ]] || fail "mkdir $i"
done
# Every file root reads afterwards, listed now.
mapfile -t files < <(find "$MNT" -maxdepth 2 -type f | sort)
# shellcheck disable=SC2012 # names are VF addresses and file names: no newlines
listing=$(ls "$MNT")
((${#files[@]} > 64 * 5)) || fail "only ${#files[@]} files under the mount"
size=$(vf_read "$MNT/metrics" | wc -c)
count=$((2 * 33554432 / size))
echo "metrics is $size bytes: lending $count descriptors"

mkfifo "$T/take.in" "$T/take.out"
exec {take_in}<>"$T/take.in" {take_out}<>"$T/take.out"
background "$lend" take "$T/lend.sock" <"$T/take.in" >"$T/take.out"
read -r -t 60 -u "$take_out" line || line=nothing
[[ $line == listening ]] || fail "the root reader did not start ($line)"
gave=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$lend" give "$T/lend.sock" "$count" "$MNT/metrics") ||
	fail "the user could not open and pass $count descriptors"
[[ $gave == "gave $count" ]] || fail "gave: $gave"
read -r -t 120 -u "$take_out" line || line=nothing
read -r word ok nobufs other <<<"$line"
[[ $word == read ]] || fail "the root reader: $line"
echo "root read $ok of the user's descriptors; $nobufs got ENOBUFS, $other another error"
((nobufs > 0 && other == 0)) || fail "the user's snapshots were not bounded ($line)"

# Her budget is spent, not root's: root reads every file ...
# shellcheck disable=SC2012
[[ $(ls "$MNT" 2>&1) == "$listing" ]] || fail "root cannot list the mount: $(ls "$MNT" 2>&1 | tail -n 1)"
for f in "${files[@]}"; do
	[[ $(vfio read "$f") == ok* ]] || fail "root cannot read $f: $(vfio read "$f")"
done
grep -q "reader budget of uid 65534 spent" "$DAEMON_LOG" || fail "no log line naming the user's spent budget"
! grep -q "reader budget of uid 0 spent" "$DAEMON_LOG" || fail "root's budget was spent"
# ... and the sentinel polls on.
polls=$(metric vfhealth_sentinel_polls_total)
# shellcheck disable=SC2016 # $1 $2 $3 are the inner shell's
wait_for 20 "the sentinel to poll again" \
	sh -c '[ "$("$1" read "$2" | awk "\$1 == \"vfhealth_sentinel_polls_total\" { print \$2 }")" -gt "$3" ]' \
	sh "$VFIO" "$MNT/metrics" "$((polls + 2))"
! grep -q "sentinel: cannot read .*claims" "$DAEMON_LOG" || fail "the sentinel could not read claims"

exec {take_in}>&-
stop_daemon
