#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2034 # the variables are for the scripts that source this
# tests/integrations/lib.sh - the integrations suite's helpers on top of the
# harness (tests/lib/harness.sh: temp dir $T, cleanup, a real vfhealthd on
# $MNT, waits).  Source it from bash.
#
# Environment (set by tests/integrations/meson.build): the harness's
# programs, plus VFHEALTH_SOURCE_ROOT (the examples under test).
# shellcheck source=../lib/harness.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/../lib/harness.sh"

source_root=${VFHEALTH_SOURCE_ROOT:?run under meson test}

# expect_grep PATTERN TEXT WHAT: TEXT has a line matching the extended regex.
expect_grep() {
	grep -Eq -- "$1" <<<"$2" || fail "$3: no line matching /$1/ in: $2"
	pass "$3: a line matches /$1/"
}

# claim_key FILE KEY: the value of KEY in a claim file.
claim_key() {
	sed -n "s/^$2=//p" "$1"
}

# release_claim FILE: release the claim by its claimed_at, as its manager
# does once its VMM is gone (rm refuses while the VMM may run).
release_claim() {
	echo "release=$(claim_key "$1" claimed_at)" >"$1"
}

# fill_db_dir: make the store unavailable: its directory (the caller
# mounted $T/db as a small tmpfs before start_daemon) fills up, and the next
# commit (a threshold change) fails and latches the store unavailable.
fill_db_dir() {
	local t
	dd if=/dev/zero of="$T/db/fill" bs=64k 2>/dev/null || true
	t=$(cat "$MNT/threshold")
	/bin/echo $((t % 1000 + 1)) >"$MNT/threshold" 2>/dev/null || true
	[[ $(cat "$MNT/status") == unavailable:* ]] || fail "the store did not become unavailable: $(cat "$MNT/status")"
}

# listen_unix PATH: a real process (in BG_PIDS, its pid in LISTENER_PID)
# holding a Unix socket that listens on PATH, as a VMM's control socket;
# returns once it listens.  Killing it leaves the socket file behind, with
# nothing listening on it (as after a VMM's SIGKILL).
listen_unix() {
	local fifo line
	fifo=$(mktemp -u "$T/listen.XXXXXX")
	mkfifo "$fifo"
	python3 -c 'import signal, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen()
print("listening", flush=True)
signal.pause()' "$1" >"$fifo" &
	LISTENER_PID=$!
	BG_PIDS+=("$LISTENER_PID")
	read -r -t 10 line <"$fifo" || line=
	rm -f "$fifo"
	[[ $line == listening ]] || fail "nothing listens on $1"
}

# stop_listener: kill LISTENER_PID and reap it.
stop_listener() {
	kill "$LISTENER_PID"
	wait "$LISTENER_PID" 2>/dev/null || true
}
