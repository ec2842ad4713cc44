#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The sentinel finds the claims to poll in the top-level `claims` file, one
# read per poll, not by listing every VF's assignments/: it
# polls what the file names and nothing else, follows the file when it
# changes, and counts a missing file or a bad line as a list error while it
# still polls the good lines.  Runs the standalone sentinel against a plain
# directory laid out like the mount (no FUSE needed), where the file and the
# assignments/ directories can disagree.  That the daemon's file names
# exactly the live claims is tests/fs/test-claims-file.sh.
source "$(dirname "$0")/lib.sh"
: "${VFHEALTH_SENTINEL:?}"

FAKE=$T/fake
V1=0000:41:00.1
V2=0000:41:00.2
mkdir -p "$FAKE/$V1/assignments" "$FAKE/$V2/assignments"
echo ok >"$FAKE/status"
start_vmm one --never-answer --connect-log "$T/one.connects"
start_vmm two --never-answer --connect-log "$T/two.connects"
for n in 1 2; do
	name=$([[ $n == 1 ]] && echo one || echo two)
	vf=$([[ $n == 1 ]] && echo "$V1" || echo "$V2")
	printf 'claimed_at=2026-11-29T07:44:51.00000000%dZ\nagent=hvsock:%s:2222\ncontrol=%s\npid=\n' \
		"$n" "$T/$name.hv" "$T/$name.ctl" >"$FAKE/$vf/assignments/vm-$n"
done
# set_claims LINE...: replace the file at once, as a render would.
set_claims() {
	printf '%s\n' "$@" >"$FAKE/claims.new"
	mv "$FAKE/claims.new" "$FAKE/claims"
}
set_claims "$V1 vm-1" # vm-2 has an assignment file but is not a live claim

METRICS_FILE=$T/sentinel.prom
"$VFHEALTH_SENTINEL" --socket-dir "$T" --poll-interval 0.2 --poll-timeout 0.2 --no-reconcile \
	--metrics-file "$METRICS_FILE" "$FAKE" >>"$T/sentinel.log" 2>&1 &
BG_PIDS+=("$!")
wait_for 20 "three polls" metric_ge vfhealth_sentinel_polls_total 3
wait_for 20 "vm-1 polled" lines_at_least "$T/one.connects" 2
(($(lines_in "$T/two.connects") == 0)) || fail "vm-2, not in claims, was polled"
[[ $(metric vfhealth_sentinel_list_errors_total) == 0 ]] || fail "list errors with a good claims file"

# The file changes: the next polls follow it.
set_claims "$V2 vm-2"
wait_for 20 "vm-2 polled once named" lines_at_least "$T/two.connects" 2
one=$(lines_in "$T/one.connects")
wait_polls 3 20
(($(lines_in "$T/one.connects") <= one + 1)) || fail "vm-1 still polled after it left claims"

# A bad line is a list error (once per poll); the good line is still polled.
set_claims "$V1 vm-1" "not a claim line" "$V2 vm-2 extra"
one=$(lines_in "$T/one.connects")
errors=$(metric vfhealth_sentinel_list_errors_total)
wait_polls 3 20
(($(lines_in "$T/one.connects") >= one + 2)) || fail "the good line was not polled next to bad ones"
(($(metric vfhealth_sentinel_list_errors_total) >= errors + 2)) || fail "bad lines not counted as list errors"
grep -q "claims: unexpected line not a claim line" "$T/sentinel.log" || fail "bad line not logged"

# No claims file: a list error, nothing polled.
rm "$FAKE/claims"
wait_polls 1 20
errors=$(metric vfhealth_sentinel_list_errors_total)
one=$(lines_in "$T/one.connects")
two=$(lines_in "$T/two.connects")
wait_polls 3 20
(($(metric vfhealth_sentinel_list_errors_total) >= errors + 3)) || fail "a missing claims file is not a list error"
(($(lines_in "$T/one.connects") == one && $(lines_in "$T/two.connects") == two)) ||
	fail "claims polled without a claims file"
grep -q "cannot read $FAKE/claims" "$T/sentinel.log" || fail "missing claims file not logged"
kill "${BG_PIDS[-1]}"
wait "${BG_PIDS[-1]}" || fail "vfhealth-sentinel exited $? on SIGTERM"
echo PASS
