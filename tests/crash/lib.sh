#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2034 # the variables are for the scripts that source this
# tests/crash/lib.sh - the crash suite's own helpers on top of the harness
# (tests/lib/harness.sh: temp dir, cleanup, start/stop/kill of a real
# vfhealthd on $MNT and $DB, waits); shared with tests/adversarial and
# tests/bench.  vfio tells EIO from EINVAL from success, which a shell
# redirection cannot.
#
# Environment (set by meson): the harness's, plus VFIO.
# shellcheck source=../lib/harness.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"

: "${VFIO:?VFIO must name the vfio helper (set by meson)}"

# A SIGKILLed daemon must be gone within 5 s, however busy it was.
KILL_DEADLINE=5

# vfio OP PATH [TEXT]: one operation, its result ("ok", "EIO", ...) on stdout;
# "HUNG" when it did not return within 20 s (a wedged mount).
vfio() {
	local rc=0
	timeout -s KILL 20 "$VFIO" "$@" || rc=$?
	((rc != 137)) || echo HUNG
	return 0
}

# expect WANT OP PATH [TEXT]: vfio OP says WANT (its first word); $mode, the
# variant the test runs, names the failure.
expect() {
	local want=$1 got
	shift
	got=$(vfio "$@")
	[[ $got == "$want"* ]] || fail "${mode:-}: vfio $*: got '$got', want '$want'"
	pass "${mode:-}: vfio $1 $2: $want"
}

# vf_read PATH: the content of a file on the mount; fails the test unless the
# read succeeds.
vf_read() {
	local out
	out=$(vfio read "$1") || fail "vfio read $1"
	[[ ${out%%$'\n'*} == ok ]] || fail "read $1: ${out%%$'\n'*}"
	printf '%s' "${out#ok$'\n'}"
}
