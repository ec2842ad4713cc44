#!/usr/bin/env bash
# demo-host.sh - examples/demo.sh as `./dev.sh run` starts it (--build, no
# --workdir, no --mount) on a host that looks like it has an NVIDIA GPU (an
# nvidia-smi on PATH that lists one):
#   * it runs the demo, on BUILD_DIR/demo/mnt with BUILD_DIR/demo/vfhealth.db,
#     never on /run/vfhealth or /var/lib/vfhealth, and says so;
#   * a real Ctrl-C (SIGINT to the demo's process group, as the terminal
#     sends it) unmounts and stops every process, and the logs it pointed at
#     stay;
#   * the next demo empties the directory and runs again;
#   * --mount or --workdir on the service's paths is refused and creates
#     nothing.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse
demo=$source_root/examples/demo.sh
[[ -x $demo ]] || fail "$demo is missing or not executable"
: "${VFHEALTHD:?run under meson test}" "${VFHEALTH_AGENT:?}" "${TEST_VMM:?}"

# The programs come from the environment; --build only names the directory
# whose demo/ the demo uses, as `./dev.sh run` passes build-run.
build=$T/build-run
work=$build/demo
mkdir -p "$build" "$T/bin"
cat > "$T/bin/nvidia-smi" <<'EOF'
#!/bin/sh
echo "GPU 0: NVIDIA A16 (UUID: GPU-00000000-0000-0000-0000-000000000000)"
EOF
chmod +x "$T/bin/nvidia-smi"
export PATH=$T/bin:$PATH

out=$T/demo.out
demo_pgid=
reap_demo() {
	[[ -n $demo_pgid ]] || return 0
	kill -KILL -- "-$demo_pgid" 2>/dev/null || true
	demo_pgid=
}
on_exit reap_demo
on_exit "detach_mounts_under '$build'"
production_mounts() { awk '$5 == "/run/vfhealth" || index($5, "/run/vfhealth/") == 1' /proc/self/mountinfo; }
before=$(production_mounts)

# ---- the demo until Ctrl-C ------------------------------------------------------

# Job control: the demo runs in a process group of its own, the terminal's
# foreground group a Ctrl-C signals (and, unlike a plain background job, it
# does not start with SIGINT ignored).
set -m
"$demo" --build "$build" >"$out" 2>&1 &
demo_pgid=$!
set +m
wait_demo_ready "$out" "$demo_pgid"
grep -qF "demo: this host has an NVIDIA GPU; the demo still runs on a mount and database of its own" "$out" ||
	{ cat "$out" >&2; fail "the demo did not see the GPU nvidia-smi reports"; }
grep -qxF "==> Mounting vfhealthd on $work/mnt (database $work/vfhealth.db)" "$out" ||
	{ cat "$out" >&2; fail "the demo did not mount on $work/mnt with $work/vfhealth.db"; }
awk -v m="$work/mnt" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo ||
	fail "nothing mounted on $work/mnt"
[[ $(production_mounts) == "$before" ]] || fail "the demo mounted on /run/vfhealth"
for pid in $(pgrep -g "$demo_pgid"); do
	if tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qE '/run/vfhealth|/var/lib/vfhealth'; then
		fail "a demo process names the service's paths: $(tr '\0' ' ' < "/proc/$pid/cmdline")"
	fi
done
logs_line=$(grep '^Logs: ' "$out")
[[ $logs_line == "Logs: $work/*.log."* ]] || fail "the demo points at other logs: $logs_line"

kill -INT -- "-$demo_pgid"
rc=0
wait "$demo_pgid" || rc=$?
demo_pgid=
[[ $rc == 130 ]] || { cat "$out" >&2; fail "the demo exited $rc on Ctrl-C, want 130"; }
[[ -z $(awk -v d="$work/" 'index($5, d) == 1' /proc/self/mountinfo) ]] || fail "Ctrl-C left a mount under $work"
left=$(pgrep -f -- "$work/" || true)
[[ -z $left ]] || fail "Ctrl-C left processes: $left"
# The logs it pointed at are still there, with what the run wrote.
for log in vfhealthd.log vm-a.log vm-d.log; do
	[[ -s $work/$log ]] || fail "after Ctrl-C, $work/$log is gone or empty"
done
grep -qF "the work directory $work, logs included, stays until the next demo" "$out" ||
	fail "the demo did not say where its logs stay"

# ---- the next demo empties the directory --------------------------------------

: > "$work/left-by-the-last-demo"
rc=0
timeout -k 5 60 "$demo" --build "$build" --once >"$out" 2>&1 || rc=$?
detach_mounts_under "$work"
[[ $rc == 0 ]] || { cat "$out" >&2; fail "the next demo --once exited $rc"; }
[[ ! -e $work/left-by-the-last-demo ]] || fail "the next demo did not empty $work"
[[ -s $work/vfhealthd.log ]] || fail "the next demo's log is missing"
grep -qxF "==> Mounting vfhealthd on $work/mnt (database $work/vfhealth.db)" "$out" ||
	{ cat "$out" >&2; fail "the next demo did not mount on $work/mnt"; }

# ---- the service's paths are refused ---------------------------------------------

refused() { # WHAT ARGS...: the demo exits 2 at once, naming the path, creating nothing.
	local what=$1 rc=0
	shift
	timeout -k 5 30 "$demo" --build "$build" "$@" >"$T/refused.out" 2>&1 || rc=$?
	[[ $rc == 2 ]] || { cat "$T/refused.out" >&2; fail "$what: the demo exited $rc, want 2"; }
	grep -q "service's" "$T/refused.out" || { cat "$T/refused.out" >&2; fail "$what: no message"; }
}
refused "--mount /run/vfhealth" --mount /run/vfhealth --once
refused "--mount /run/vfhealth/x" --mount /run/vfhealth/x --once
[[ ! -e /run/vfhealth/x ]] || fail "the refused demo created /run/vfhealth/x"
refused "--workdir /var/lib/vfhealth/demo" --workdir /var/lib/vfhealth/demo --once
[[ ! -e /var/lib/vfhealth/demo ]] || fail "the refused demo created /var/lib/vfhealth/demo"
[[ $(production_mounts) == "$before" ]] || fail "a demo mounted on /run/vfhealth"
echo "demo-host OK"
