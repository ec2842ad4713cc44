#!/usr/bin/env bash
# demo.sh - examples/demo.sh cannot rot: run it with --once against the
# build under test.  It must mount vfhealthd, run simulated guests behind
# test-vmm, see the sentinel quarantine the wedged VF after two failed
# assignments and a VF whose VMM was killed during init move to the back of
# allocatable, verify that itself, and clean up (no mount, no child left).
# Without --mount it mounts in its work directory, not on /run/vfhealth.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse
demo=$source_root/examples/demo.sh
[[ -x $demo ]] || fail "$demo is missing or not executable"

out=$T/demo.out
work=$T/demo
rc=0
# A broken daemon can leave the demo blocked in a syscall on its mount:
# bound it, and clean up after it here if it could not.
timeout -k 5 45 "$demo" --once --workdir "$work" >"$out" 2>&1 || rc=$?
leftover_mounts=$(awk -v d="$work/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo)
mapfile -t leftover_pids < <(pgrep -f -- "$work/" || true)
for pid in "${leftover_pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
detach_mounts_under "$work"
if [[ $rc != 0 ]]; then
	cat "$out" >&2
	[[ -f $work/vfhealthd.log ]] && { echo "--- $work/vfhealthd.log:" >&2; awk '!/^<6>/ && n++ < 40' "$work/vfhealthd.log" >&2; }
	fail "demo --once exited $rc"
fi
grep -q "quarantined after two failed assignments" "$out" || { cat "$out" >&2; fail "the demo did not report the quarantine"; }
grep -q "GPU 0000:42:00.0 drained and recovered" "$out" || { cat "$out" >&2; fail "the demo did not recover its second GPU"; }
grep -q "moved to the back of allocatable before any guest failed on it" "$out" ||
	{ cat "$out" >&2; fail "the demo did not show the suspect VF"; }
# Without --mount it mounts in its work directory, never on /run/vfhealth.
grep -qxF "==> Mounting vfhealthd on $work/mnt (database $work/vfhealth.db)" "$out" ||
	{ cat "$out" >&2; fail "the demo did not mount on $work/mnt"; }
# Cleaned up by itself: nothing mounted under its work directory, no process left.
[[ -z $leftover_mounts ]] || fail "the demo left a mount: $leftover_mounts"
((${#leftover_pids[@]} == 0)) || fail "the demo left processes: ${leftover_pids[*]}"
echo "demo OK"
