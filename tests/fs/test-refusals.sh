#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A refused write says, once, in the daemon's log at info level, which rule
# it broke and who wrote it (uid, pid): the writer got a bare EINVAL.
# Each refusal here adds exactly one "refused" line, naming
# the rule; an accepted write adds none.
source "$(dirname "$0")/lib.sh"
require_fuse
start_daemon

make_vfs V
touch "$V/assignments/vm-1"

refusals() { grep -c ' refused (uid ' "$DAEMON_LOG" || true; }

# refused RULE WHAT COMMAND...: COMMAND fails with EINVAL and the log gains
# exactly one refusal line, which names WHAT and RULE.
refused() {
	local rule=$1 what=$2 before line
	shift 2
	before=$(refusals)
	expect_err "$EINVAL" "$@"
	assert_eq "$(refusals)" "$((before + 1))" "refusal lines after '$*'"
	line=$(grep ' refused (uid ' "$DAEMON_LOG" | tail -n 1)
	[[ $line == "<6>"* ]] || fail "not at info level: $line"
	[[ $line == *"$what refused (uid 0, pid "[0-9]*"): "*"$rule"* ]] ||
		fail "'$*' logged '$line', want '$what' and '$rule'"
}

refused "an instance id is 1..128 of [A-Za-z0-9._-]" "write to 0000:41:00.4/report" \
	put "$V/report" "failed vm:1 - NVRM: boom"
refused 'a report starts with "failed" or "ok"' "write to 0000:41:00.4/report" \
	put "$V/report" "broken vm-1 -"
refused "CLAIMED_AT is an RFC 3339 UTC time" "write to 0000:41:00.4/report" \
	put "$V/report" "ok vm-1 yesterday"
refused "an ok report has nothing after CLAIMED_AT" "write to 0000:41:00.4/report" \
	put "$V/report" "ok vm-1 - trailing"
refused "pid= is an integer 1..4194304" "write to 0000:41:00.4/assignments/vm-1" \
	put "$V/assignments/vm-1" "pid=abc"
refused "the keys are claimed_at, agent, control, pid" \
	"write to 0000:41:00.4/assignments/vm-1" put "$V/assignments/vm-1" "color=blue"
refused "agent= is an endpoint" "write to 0000:41:00.4/assignments/vm-1" \
	put "$V/assignments/vm-1" "agent=tcp:1.2.3.4"$'\npid='"$$"
refused "an instance id is 1..128" "claim vm:2" touch "$V/assignments/vm:2"
refused "a command is one write(2) at offset 0" "write to 0000:41:00.4/report" \
	bash -c 'exec 3<>"$1" && printf "ok vm-1 -" >&3 && printf "ok vm-1 -" >&3' bash "$V/report"
refused "the threshold is a whole number from 1 to 1000" "write to threshold" \
	put "$MNT/threshold" "03"
refused "max_quarantined is a whole number from 0 (no cap)" "write to max_quarantined" \
	put "$MNT/max_quarantined" "-1"
refused 'the only command status takes is "repair"' "write to status" put "$MNT/status" "fix"
refused 'mode takes "enforce" or "observe"' "write to mode" put "$MNT/mode" "dry-run"
refused 'quarantined takes "1" (hold) or "0"' "write to 0000:41:00.4/quarantined" \
	put "$V/quarantined" "yes"

# Accepted writes log no refusal.
before=$(refusals)
put "$V/assignments/vm-1" "pid=$$"
put "$V/report" "ok vm-1 -"
assert_eq "$(refusals)" "$before" "refusal lines after accepted writes"
echo PASS
