#!/usr/bin/env bash
# demo.sh - examples/demo.sh cannot rot: run it with --once against the
# build under test.  It must mount vfhealthd, run simulated guests behind
# test-vmm, see the sentinel quarantine the wedged VF after two failed
# assignments, verify that itself, and clean up (no mount, no child left).
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
need_fuse
demo=$source_root/examples/demo.sh
[[ -x $demo ]] || fail "$demo is missing or not executable"

out=$ops_tmp/demo.out
rc=0
"$demo" --build "$build_root" --once --workdir "$ops_tmp/demo" >"$out" 2>&1 || rc=$?
[[ $rc == 0 ]] || { cat "$out" >&2; fail "demo --once exited $rc"; }
grep -q "quarantined after two failed assignments" "$out" || { cat "$out" >&2; fail "the demo did not report the quarantine"; }
# Cleaned up: nothing mounted under its work directory, no process left.
if grep -qF "$ops_tmp/demo" /proc/self/mountinfo; then fail "the demo left a mount"; fi
if pgrep -f -- "$ops_tmp/demo" >/dev/null; then fail "the demo left processes: $(pgrep -af -- "$ops_tmp/demo")"; fi
echo "demo OK"
