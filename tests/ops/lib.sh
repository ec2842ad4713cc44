#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2034 # the variables are for the scripts that source this
# tests/ops/lib.sh - the ops suite's own helpers on top of the harness
# (tests/lib/harness.sh: temp dir $T, cleanup, a real vfhealthd on $MNT,
# waits).  Source it from bash.
#
# Environment (set by tests/ops/meson.build): the harness's programs, plus
#   VFHEALTH_SOURCE_ROOT  the source tree (the examples under test)
#   VFHEALTH_BUILD_ROOT   the build directory, for `meson install` and the
#                         configured example units only
# shellcheck source=../lib/harness.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/../lib/harness.sh"

source_root=${VFHEALTH_SOURCE_ROOT:?run under meson test}
build_root=${VFHEALTH_BUILD_ROOT:?run under meson test}

# report_failed MOUNT VF INSTANCE: one failed assignment, as the sentinel
# writes it (assigned_at unknown: "-").
report_failed() {
	printf 'failed %s - NVRM: GPU 0000:00:05.0: RmInitAdapter failed! (0x22:0x65:884)\n' "$3" \
		> "$1/$2/report"
}

# wait_demo_ready OUT PID: the demo (PID, its output in OUT) printed its
# "What to try next" block and the Logs line that ends it; fails at once,
# showing OUT, if the demo exited first.
_demo_ready() {
	grep -q '^Logs: .*Press Ctrl-C' "$1" && return 0
	kill -0 "$2" 2>/dev/null || { cat "$1" >&2; fail "the demo exited before it was ready"; }
	return 1
}
wait_demo_ready() {
	wait_for 60 "the demo's 'What to try next'" _demo_ready "$1" "$2"
}

# wait_for_line FILE LINE SECONDS: FILE (a watcher's output) gets exactly LINE.
wait_for_line() {
	wait_for "$3" "'$2' in $1" grep -qxF -- "$2" "$1"
}
