# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# tests/fs/lib.sh - sourced by the fs integration tests: the harness
# (tests/lib/harness.sh: temp dir, cleanup, start/stop/kill of a real
# vfhealthd, waits, errno strings) plus the fs suite's own assertions and the
# ways an operator writes a file.  Every test skips (exit 77) only when FUSE
# cannot be mounted here.
# shellcheck source=../lib/harness.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"

# The file interface alone: the sentinel (tests/sentinel) would poll and
# reconcile the test's claims (--no-sentinel alone still reconciles).  A
# test may clear this.
DAEMON_ARGS=(--no-sentinel --no-reconcile)

assert_eq() {
	[[ $1 == "$2" ]] || fail "${3:-value}: expected '$2', got '$1'"
}

# The whole content of a file, through cat.
assert_cat() {
	local got
	got=$(cat "$1") || fail "cat $1 failed"
	assert_eq "$got" "$2" "cat $1"
}

assert_match() {
	[[ $1 =~ $2 ]] || fail "${3:-value}: '$1' does not match /$2/"
}

# expect_err MESSAGE COMMAND...: the command fails and says MESSAGE.
expect_err() {
	local msg=$1 out
	shift
	if out=$("$@" 2>&1); then
		fail "'$*' succeeded; expected '$msg'"
	fi
	[[ $out == *"$msg"* ]] || fail "'$*': expected '$msg', got '$out'"
}

# put FILE TEXT: `echo TEXT > FILE` through sh -c, as an operator would.
# coreutils' echo rather than dash's builtin, which reports every failed
# write as "I/O error" whatever the errno.
put() {
	sh -c '/bin/echo "$2" > "$1"' sh "$1" "$2"
}

# putf FILE FORMAT...: printf through sh -c (multi-line commands, no newline).
putf() {
	local file=$1
	shift
	sh -c 'f=$1; shift; /usr/bin/printf "$@" > "$f"' sh "$file" "$@"
}

# as_user UID COMMAND...: run as an unprivileged user with no groups.
as_user() {
	local uid=$1
	shift
	setpriv --reuid="$uid" --regid="$uid" --clear-groups "$@"
}
