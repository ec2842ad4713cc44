#!/usr/bin/env bash
# example-path-unit.sh - the systemd path unit example:
#  - systemd-analyze verify default.target, with every shipped unit enabled
#    (the path unit as its header says), finds no ordering cycle and no
#    error (when systemd-analyze and systemd's own units are installed);
#  - a change of the set makes the kernel emit IN_CLOSE_WRITE on
#    MOUNT/quarantined, the event PathChanged= waits for;
#  - the script the service runs (on-quarantine-change.sh) calls the hooks
#    once per VF entering or leaving quarantine, nothing when nothing
#    changed, and keeps its state when the store cannot be read.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse

examples=$source_root/examples/systemd
script=$examples/on-quarantine-change.sh

# Every shipped unit, enabled as its [Install] section (or, for the example
# path unit, its header) says, under systemd's own units: default.target's
# transaction must have no ordering cycle (systemd breaks one by dropping a
# start job, vfhealthd's on some boots), and verify must print nothing at all
# (it exits 0 on unknown keys, bad values and cycles alike).
if command -v systemd-analyze >/dev/null && [[ -f /lib/systemd/system/basic.target ]]; then
	units=$T/units
	mkdir -p "$units/multi-user.target.wants" "$units/timers.target.wants" \
		"$units/vfhealthd.service.wants"
	cp "$examples/vfhealth-quarantine.path" "$source_root/examples/prometheus/vfhealth-textfile.timer" "$units/"
	grep -q '^PathChanged=/run/vfhealth/quarantined$' "$units/vfhealth-quarantine.path" ||
		fail "the path unit does not watch /run/vfhealth/quarantined"
	# The configured units name installed programs; point them at ours.
	sed -e "s|^ExecStart=[^ ]*|ExecStart=$VFHEALTHD|" "$build_root/examples/vfhealthd.service" \
		> "$units/vfhealthd.service"
	sed -e "s|^ExecStart=[^ ]*|ExecStart=$VFHEALTH_AGENT|" "$build_root/examples/vfhealth-agent.service" \
		> "$units/vfhealth-agent.service"
	sed -e "s|^ExecStart=[^ ]*|ExecStart=$script|" "$build_root/examples/vfhealth-quarantine.service" \
		> "$units/vfhealth-quarantine.service"
	sed -e "s|^ExecStart=[^ ]*|ExecStart=$source_root/examples/prometheus/vfhealth-textfile.sh|" \
		"$build_root/examples/vfhealth-textfile.service" > "$units/vfhealth-textfile.service"
	ln -s ../vfhealthd.service ../vfhealth-agent.service "$units/multi-user.target.wants/"
	ln -s ../vfhealth-textfile.timer "$units/timers.target.wants/"
	ln -s ../vfhealth-quarantine.path "$units/vfhealthd.service.wants/"
	out=$(cd "$units" && SYSTEMD_UNIT_PATH=$units: SYSTEMD_LOG_LEVEL=notice \
		systemd-analyze verify --man=no default.target ./*.service ./*.path ./*.timer 2>&1) || true
	[[ -z $out ]] || fail "systemd-analyze verify default.target, every unit enabled: $out"
	echo "ok   systemd-analyze verify default.target with every unit enabled"
fi

mnt=$MNT
start_daemon --no-sentinel
mkdir "$mnt/0000:41:00.4" "$mnt/0000:41:00.5"

# The event PathChanged= waits for.
if command -v inotifywait >/dev/null; then
	inotifywait -e close_write -t 120 "$mnt/quarantined" >"$T/inotify.out" 2>"$T/inotify.err" &
	iw=$!
	wait_for 10 "inotifywait to watch" grep -q "Watches established" "$T/inotify.err"
	echo 1 > "$mnt/0000:41:00.4/quarantined"
	wait "$iw" || fail "no IN_CLOSE_WRITE on quarantined: $(cat "$T/inotify.err")"
	grep -q CLOSE_WRITE "$T/inotify.out" || fail "inotifywait saw: $(cat "$T/inotify.out")"
	echo 0 > "$mnt/0000:41:00.4/quarantined"
fi

hooks=$T/hooks
calls=$T/calls
mkdir "$hooks"
# shellcheck disable=SC2016 # $1 $2 belong to the hook
printf '#!/bin/sh\necho "$1 $2" >> %q\n' "$calls" > "$hooks/10-record"
printf '#!/bin/sh\nexit 0\n' > "$hooks/20-not-executable"
chmod +x "$hooks/10-record"
: > "$calls"
run() { "$script" --mount "$mnt" --state "$T/state" --hooks "$hooks" >/dev/null; }

run || fail "first run failed"
[[ ! -s $calls ]] || fail "hooks ran with nothing quarantined: $(cat "$calls")"

echo 1 > "$mnt/0000:41:00.4/quarantined"
report_failed "$mnt" 0000:41:00.5 vm-a
report_failed "$mnt" 0000:41:00.5 vm-b
run || fail "run failed"
[[ $(cat "$calls") == $'quarantined 0000:41:00.4\nquarantined 0000:41:00.5' ]] || fail "calls: $(cat "$calls")"

# The path unit may fire more than once for one change: nothing new.
run || fail "run failed"
[[ $(wc -l < "$calls") == 2 ]] || fail "a repeated run called hooks again: $(cat "$calls")"

echo 0 > "$mnt/0000:41:00.4/quarantined"
run || fail "run failed"
[[ $(tail -n1 "$calls") == "cleared 0000:41:00.4" && $(wc -l < "$calls") == 3 ]] || fail "calls: $(cat "$calls")"

# A failing hook is reported (exit 1) but the others still run.
printf '#!/bin/sh\nexit 3\n' > "$hooks/05-fails"
chmod +x "$hooks/05-fails"
echo 0 > "$mnt/0000:41:00.5/quarantined"
rc=0; run 2>/dev/null || rc=$?
[[ $rc == 1 && $(tail -n1 "$calls") == "cleared 0000:41:00.5" ]] || fail "failing hook: rc $rc, calls: $(cat "$calls")"
rm "$hooks/05-fails"

# The mount gone (reads fail): exit 1, state kept, no VF reported cleared.
echo 1 > "$mnt/0000:41:00.4/quarantined"
run || fail "run failed"
state_before=$(cat "$T/state")
calls_before=$(cat "$calls")
stop_daemon
rc=0; run 2>/dev/null || rc=$?
[[ $rc == 1 ]] || fail "unreadable quarantined: exit $rc"
[[ $(cat "$T/state") == "$state_before" && $(cat "$calls") == "$calls_before" ]] ||
	fail "an unreadable set changed the state or called hooks"
echo "path unit OK"
