#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What one read costs in FUSE requests, counted on a real mount from the
# daemon's request trace (-d).  Which requests the kernel sends besides the
# ones that matter is its own choice (a GETATTR for an atime it dropped, a
# LOOKUP to revalidate an entry), so the test asserts what must and must
# never happen, and a bound: a cached read of VF/quarantined never reaches
# the daemon as a READ (`cat` fstat(2)s what it opens; at most OPEN, one
# GETATTR and the asynchronous RELEASE); after a change the new value is read
# (a READ) and the cost falls back to the cached one.  A top-level list reads
# through at every open (a READ each time), so no reader can see a page
# cached before a change (docs/architecture.md, "The ordering rule").  Each
# reader's requests are told apart by its pid.
source "$(dirname "$0")/lib.sh"
require_fuse
start_daemon -d

make_vfs V

# read_counted FILE: cat FILE as its own process, its output in OUT; then
# waits for that process's RELEASE (sent after close(2) returns) and sets
# OPS to the requests that process caused, in order ("OPEN RELEASE").
OPS='' OUT=''
read_counted() {
	local file=$1 from pidfile=$T/cat.pid pid
	from=$(wc -l <"$DAEMON_LOG")
	OUT=$(sh -c 'echo $$ >"$1"; exec cat "$2"' sh "$pidfile" "$file") || fail "cat $file"
	pid=$(cat "$pidfile")
	# The RELEASE carries no pid (pid: 0): it is the one of the node cat opened.
	requests_of() {
		tail -n +"$((from + 1))" "$DAEMON_LOG" | awk -v pid="$pid" '
			/opcode: / { op = $4; node = $7; p = $NF; sub(",", "", node) }
			/opcode: / && p == pid { print op; if (op == "OPEN") opened = node }
			/opcode: RELEASE / && node == opened { print op }'
	}
	wait_for 10 "the RELEASE of cat $file" eval 'requests_of | grep -qx RELEASE'
	OPS=$(requests_of | tr '\n' ' ')
	OPS=${OPS% }
}

# put_touched FILE TEXT [OTHER...]: put, then wait until the notifier's
# toucher has written FILE too (a second WRITE and RELEASE on its node,
# after put's) and each OTHER file the change affects (one each): a write
# through the mount drops the cached attributes once more, and its RELEASE
# (pid 0) would count as a reader's.  A node is its inode number.
put_touched() {
	local file=$1 text=$2 from f
	shift 2
	from=$(wc -l <"$DAEMON_LOG")
	put "$file" "$text"
	node_ops() { # NODE OPCODE
		tail -n +"$((from + 1))" "$DAEMON_LOG" | awk -v node="$1" -v op="$2" '
			/opcode: / { n = $7; sub(",", "", n) } /opcode: / && $4 == op && n == node' | wc -l
	}
	touched() { # FILE MIN
		local node
		node=$(stat -c %i "$1")
		(($(node_ops "$node" WRITE) >= $2 && $(node_ops "$node" RELEASE) >= $2))
	}
	wait_for 10 "the toucher's write of $file" touched "$file" 2
	for f in "$@"; do
		wait_for 10 "the toucher's write of $f" touched "$f" 1
	done
}

# The trace names every request with its pid (what read_counted relies on).
read_counted "$V/quarantined"
assert_eq "$OUT" 0 "first read"
assert_match "$OPS" "OPEN" "the first read's requests"

# bounded WHAT MAX MUST MUSTNOT: OPS, LOOKUPs aside (entries are revalidated
# after 1 s, and a loaded machine can take that long), holds MUST, never
# MUSTNOT (a request name, or - for none), and at most MAX requests.
bounded() {
	local what=$1 max=$2 must=$3 mustnot=$4 ops n
	ops=${OPS//LOOKUP /}
	ops=${ops//LOOKUP/}
	n=$(wc -w <<<"$ops")
	((n <= max)) || fail "$what: $n requests ($ops), at most $max"
	[[ " $ops " == *" $must "* ]] || fail "$what: no $must in '$ops'"
	[[ $mustnot == - || " $ops " != *" $mustnot "* ]] || fail "$what: a $mustnot in '$ops'"
}

# Steady state: served from the page cache, never a READ.
steady() { # WHAT EXPECTED_CONTENT
	local i
	for i in 1 2 3; do
		read_counted "$V/quarantined"
		assert_eq "$OUT" "$2" "$1: cached read $i"
		bounded "$1: requests of cached read $i" 3 OPEN READ
	done
}
read_counted "$V/quarantined"
steady "before a change" 0

# A change: the notifier drops the page and the attributes before the write
# is answered, so the next read sees the new value (a READ refills the page;
# the toucher's write is waited for here, since it drops the attributes once
# more), then the cost is the cached one again.
put_touched "$V/quarantined" 1 "$MNT/quarantined"
read_counted "$V/quarantined"
assert_eq "$OUT" 1 "the read after the change"
assert_match "$OPS" "READ" "the read after the change reaches the daemon"
read_counted "$V/quarantined"
steady "after a change" 1
put_touched "$V/quarantined" 0 "$MNT/quarantined"
read_counted "$V/quarantined"
assert_eq "$OUT" 0 "the read after the release"

# A top-level list reads through at every open: a READ each time (and at
# most a GETATTR for cat's fstat beside OPEN and RELEASE).
read_counted "$MNT/quarantined"
for i in 1 2; do
	read_counted "$MNT/quarantined"
	assert_eq "$OUT" "" "top-level quarantined, read $i"
	bounded "requests of top-level read $i" 4 READ -
done
put "$V/quarantined" 1
read_counted "$MNT/quarantined"
assert_eq "$OUT" "0000:41:00.4" "top-level quarantined after a change"
assert_match "$OPS" "READ" "the top-level read after a change reaches the daemon"

stop_daemon
echo "ok"
