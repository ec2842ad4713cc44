#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# vfhealthd runs the sentinel as its own program (daemon/sentinel-process.h):
#  - the child is the vfhealth-sentinel built beside vfhealthd, run with the
#    daemon's sentinel options, --counters-fd 3 and the mountpoint;
#  - it holds no /dev/fuse descriptor and none of the store's files; fd 3 is
#    the counter memfd, and the daemon's metrics show what the child counts;
#  - --sentinel-program names another program; a missing one exits 2;
#  - the child dies with the daemon (PR_SET_PDEATHSIG), and the daemon
#    exits 1 when the child dies (vfhealthd(8): the service manager
#    restarts it).
source "$(dirname "$0")/lib.sh"
: "${VFHEALTH_SENTINEL:?}"

# sentinel_child: the pid of the daemon's child that runs vfhealth-sentinel.
sentinel_child() {
	local pid
	for pid in $(cat /proc/"$DAEMON_PID"/task/*/children 2>/dev/null); do
		if [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$1" ]]; then
			echo "$pid"
			return 0
		fi
	done
	return 1
}
has_child() { sentinel_child "$1" >/dev/null; }

sentinel_exe=$(readlink -f "$(dirname "$VFHEALTHD")/vfhealth-sentinel")
[[ -x $sentinel_exe ]] || fail "no vfhealth-sentinel beside $VFHEALTHD"

# A missing program is a bad command line, refused before mounting.
rc=0
"$VFHEALTHD" -f --db "$T/db/vfhealth.db" --sentinel-program "$T/nonexistent" "$MNT" \
	2>"$T/missing.log" || rc=$?
((rc == 2)) || fail "--sentinel-program nonexistent exited $rc, not 2"
grep -q "sentinel-program.*nonexistent" "$T/missing.log" || fail "no message for a missing program"
! is_mounted "$MNT" || fail "mounted with a missing sentinel program"

# The default: the program beside vfhealthd, with the daemon's options.
start_daemon --poll-interval 0.2 --poll-timeout 2 --no-reconcile
wait_for 20 "the sentinel child" has_child "$sentinel_exe"
child=$(sentinel_child "$sentinel_exe")
BG_PIDS+=("$child") # never outlives the test, even when the assertions below fail
mapfile -d '' argv <"/proc/$child/cmdline"
[[ ${argv[*]:1} == "--socket-dir=$T --poll-interval=0.2 --poll-timeout=2 --no-reconcile --counters-fd 3 -- $MNT" ]] ||
	fail "the sentinel runs with: ${argv[*]}"
[[ $(readlink "/proc/$child/fd/3") == "/memfd:vfhealth-sentinel-counters"* ]] ||
	fail "fd 3 of the sentinel is $(readlink "/proc/$child/fd/3"), not the counter memfd"
for fd in /proc/"$child"/fd/*; do
	target=$(readlink "$fd" || true)
	case $target in
	/dev/fuse | "$T"/db/*) fail "the sentinel holds ${fd##*/} -> $target" ;;
	esac
done
# What the child counts in the memfd, the daemon renders.
wait_polls 2

# The child dies with the daemon.
kill_daemon
wait_for 10 "the sentinel to die with the daemon" process_gone "$child"
abort_mount "$MNT"

# --sentinel-program: a wrapper that records how it was run.
cat >"$T/wrapper" <<EOF
#!/bin/sh
printf '%s\n' "\$@" >"$T/wrapper.args"
exec "$sentinel_exe" "\$@"
EOF
chmod +x "$T/wrapper"
start_daemon --sentinel-program "$T/wrapper" --poll-interval 0.3 --concurrency 2
wait_for 20 "the wrapper to run" test -s "$T/wrapper.args"
wait_polls 1
[[ $(head -n 3 "$T/wrapper.args" | tr '\n' ' ') == "--socket-dir=$T --poll-interval=0.3 --concurrency=2 " ]] ||
	fail "the wrapper got: $(tr '\n' ' ' <"$T/wrapper.args")"

# The daemon exits 1 when the sentinel dies, and unmounts.
wait_for 20 "the sentinel child" has_child "$sentinel_exe"
child=$(sentinel_child "$sentinel_exe")
kill -KILL "$child"
rc=0
pid=$DAEMON_PID
DAEMON_PID= # its exit is the subject here, not a failure of the harness's stop
wait "$pid" || rc=$?
((rc == 1)) || fail "vfhealthd exited $rc when its sentinel died, not 1"
grep -q "the sentinel process died" "$T/daemon.log" || fail "the sentinel's death not logged"
! is_mounted "$MNT" || fail "still mounted after the sentinel died"
echo PASS
