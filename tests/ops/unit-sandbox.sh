#!/usr/bin/env bash
# unit-sandbox.sh - vfhealthd, the guest agent, the textfile publisher and
# the quarantine hook runner work inside the sandboxes their units give them.  systemd is not PID 1 here, so each unit's limits
# are applied by hand to the real program: the capability bounding set from
# CapabilityBoundingSet= (setpriv), no_new_privs, UMask=; meanwhile strace
# records every system call the daemon, its sentinel, the agent, the
# agent's probe and the publisher (reading the mount, and keeping its last
# copy once the mount is gone) make.  The test then checks that
#   - the FUSE mount is in the host's mount table and serves reads and writes
#     (the unit makes no mount namespace: install.sh checks the options),
#   - the sentinel reaches an agent whose socket another user owns in a
#     directory only that user may enter (why CAP_DAC_OVERRIDE is kept),
#   - the database is created 0600 (UMask=0077),
#   - the agent runs its probe and answers ok,
#   - every system call made is allowed by the unit's SystemCallFilter= lines
#     (expanded with systemd-analyze syscall-filter), so the filter never
#     kills either program for a call it needs.
# Skips (77) without FUSE, setpriv, strace or systemd-analyze.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse
for tool in setpriv strace systemd-analyze; do
	command -v "$tool" >/dev/null || skip "$tool not installed"
done
[[ $(id -u) == 0 ]] || skip "needs root (mounts as the unit does)"
id nobody >/dev/null 2>&1 || skip "no user nobody"

daemon_unit=$build_root/examples/vfhealthd.service
agent_unit=$build_root/examples/vfhealth-agent.service
textfile_unit=$build_root/examples/vfhealth-textfile.service
publish=$source_root/examples/prometheus/vfhealth-textfile.sh
hook_unit=$build_root/examples/vfhealth-quarantine.service
on_change=$source_root/examples/systemd/on-quarantine-change.sh
for u in "$daemon_unit" "$agent_unit" "$textfile_unit" "$hook_unit"; do [[ -f $u ]] || fail "$u was not configured"; done
unit_values() { sed -n "s/^$2=//p" "$1"; } # UNIT KEY

# unit_bounding UNIT: CapabilityBoundingSet=CAP_A CAP_B as setpriv's -all,+a,+b
unit_bounding() {
	local caps c bounding=-all
	grep -q '^CapabilityBoundingSet=' "$1" || fail "$1 has no CapabilityBoundingSet="
	caps=$(unit_values "$1" CapabilityBoundingSet)
	for c in $caps; do
		c=${c#CAP_}
		bounding+=",+${c,,}"
	done
	echo "$bounding"
}

# The filter: the union of the allow lines minus the union of the ~ lines.
expand_filter() { # @group or syscall...: one syscall name a line
	local x
	for x in "$@"; do
		if [[ $x == @* ]]; then
			# shellcheck disable=SC2046 # one word a line
			expand_filter $(systemd-analyze syscall-filter "$x" | sed -n 's/^    \([@a-z0-9_-]*\)$/\1/p')
		else
			echo "$x"
		fi
	done
}
unit_allowed() { # UNIT OUT: the system calls UNIT's filter allows, sorted
	local line allow=() deny=() w
	while IFS= read -r line; do
		if [[ $line == ~* ]]; then read -ra w <<<"${line#\~}"; deny+=("${w[@]}")
		else read -ra w <<<"$line"; allow+=("${w[@]}"); fi
	done < <(unit_values "$1" SystemCallFilter)
	((${#allow[@]})) || fail "$1 has no SystemCallFilter= allow list"
	comm -23 <(expand_filter "${allow[@]}" | sort -u) <(expand_filter "${deny[@]}" | sort -u) > "$2"
	[[ -s $2 ]] || fail "$1's filter allows nothing"
}

# calls_outside TRACE BIN ALLOWED: the system calls in TRACE from the execve
# of BIN on (setpriv's own capset and prctl stand for what systemd does
# before the unit's program runs) that ALLOWED lacks.
calls_outside() {
	awk -v bin="$2" 'index($0, "execve(\"" bin "\"") { on = 1; next } on' "$1" |
		sed -nE 's/^[0-9]+ +//; s/^<\.\.\. ([a-z0-9_]+) resumed>.*/\1/p; s/^([a-z0-9_]+)\(.*/\1/p' |
		sort -u > "$1.used"
	[[ -s $1.used ]] || fail "strace recorded nothing for $2"
	comm -23 "$1.used" "$3"
}

# An agent owned by nobody, in a directory only nobody may enter.
agent_dir=$T/vmm-nobody
mkdir -m 0700 "$agent_dir"
chown nobody "$agent_dir"
chmod 0711 "$T"
# A fake sysfs with one NVIDIA device, so that the agent runs its probe.
mkdir -p "$T/sysfs/bus/pci/devices/0000:00:05.0"
echo 0x10de > "$T/sysfs/bus/pci/devices/0000:00:05.0/vendor"
strace -f -qq -o "$T/agent.trace" -- \
	setpriv --reuid nobody --regid nogroup --clear-groups \
	--bounding-set "$(unit_bounding "$agent_unit")" --inh-caps -all --no-new-privs -- \
	"$VFHEALTH_AGENT" --listen "unix:$agent_dir/agent.sock" --kmsg /dev/null \
	--sysfs-root "$T/sysfs" --nvidia-smi /bin/true --probe-interval 0.2 \
	>"$T/agent.log" 2>&1 &
agent_strace_pid=$!
on_exit "pkill -P $agent_strace_pid 2>/dev/null; kill $agent_strace_pid 2>/dev/null"
wait_for 20 "the agent to listen" test -S "$agent_dir/agent.sock"
[[ $(stat -c %U "$agent_dir/agent.sock") == nobody ]] || fail "the agent socket is not nobody's"

# The daemon, confined as the unit confines it.  Claims may have to name
# socket directories: pass them when this vfhealthd knows the option.
extra=()
if "$VFHEALTHD" --help 2>&1 | grep -q -- '--socket-dir'; then
	extra+=(--socket-dir "$T")
fi
mnt=$T/mnt
mkdir "$mnt"
mkdir -m 0700 "$T/state"
umask_value=$(unit_values "$daemon_unit" UMask)
daemon_bounding=$(unit_bounding "$daemon_unit")
(
	umask "${umask_value:-0022}"
	# LeakSanitizer stops the world with ptrace, which strace already holds.
	export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
	exec strace -f -qq -o "$T/trace" -- \
		setpriv --bounding-set "$daemon_bounding" --inh-caps -all --no-new-privs -- \
		"$VFHEALTHD" -f --db "$T/state/vfhealth.db" --poll-interval 0.2 \
		--poll-timeout 1 "${extra[@]}" "$mnt"
) >>"$T/vfhealthd.log" 2>&1 &
strace_pid=$!
daemon_up() {
	is_mounted "$mnt" && [[ -e $mnt/status ]] && return 0
	kill -0 "$strace_pid" 2>/dev/null || fail "vfhealthd exited before mounting"
	return 1
}
wait_for 20 "vfhealthd to mount $mnt" daemon_up
on_exit "fusermount3 -uz $mnt 2>/dev/null; kill $strace_pid 2>/dev/null"
daemon_pid=$(pgrep -P "$strace_pid" -o) || fail "no vfhealthd under strace"

# The host sees the mount and its files work.
awk -v m="$mnt" '$5 == m { for (i = 6; i < NF; i++) if ($i == "-" && $(i + 1) == "fuse.vfhealth") found = 1 }
	END { exit !found }' \
	/proc/self/mountinfo || fail "the mount is not in the host's mount table"
vf=0000:41:00.4
mkdir "$mnt/$vf" || fail "mkdir of a VF"
: > "$mnt/$vf/assignments/vm-a"
# Its VMM is this shell: a running pid (a control socket would have to listen).
write_once "$mnt/$vf/assignments/vm-a" \
	"agent=unix:$agent_dir/agent.sock"$'\n'"pid=$$"$'\n'
counter() { awk -v want="vfhealth_sentinel_checks_total{result=\"$1\"}" '$1 == want { print $2 }' "$mnt/metrics"; }
agent_answered() { local n; n=$(counter ok); [[ -n $n && $n != 0 ]]; }
wait_for 20 "the sentinel to get ok from nobody's agent" agent_answered
echo "ok   the sentinel reached an agent socket that only nobody may reach"
[[ $(stat -c %a "$T/state/vfhealth.db") == 600 ]] ||
	fail "the database is $(stat -c %a "$T/state/vfhealth.db"), want 600 (UMask=$umask_value)"

# The publisher, confined as its unit confines it, with the mount up.
mkdir "$T/textfile"
run_publisher() { # TRACE: exit status of the publisher
	local rc=0
	strace -f -qq -o "$1" -- \
		setpriv --bounding-set "$(unit_bounding "$textfile_unit")" --inh-caps -all --no-new-privs -- \
		"$publish" --mount "$mnt" --dir "$T/textfile" 2>>"$T/publisher.log" || rc=$?
	return "$rc"
}
run_publisher "$T/publisher.trace" || fail "the publisher failed with the mount up"
grep -q '^vfhealth_textfile_scrape_ok 1$' "$T/textfile/vfhealth.prom" || fail "the publisher did not read the mount"

# The quarantine hook runner, confined as vfhealth-quarantine.service
# confines it (no capability at all, its umask), runs a hook for a VF that
# an operator holds.
mkdir "$T/hooks" "$T/hook-state"
# shellcheck disable=SC2016 # $1 and $2 are the hook's own
printf '#!/bin/sh\necho "$1 $2" >> "%s/hook.out"\n' "$T" > "$T/hooks/10-record"
chmod +x "$T/hooks/10-record"
echo 1 > "$mnt/$vf/quarantined"
hook_umask=$(unit_values "$hook_unit" UMask)
(
	umask "${hook_umask:-0022}"
	exec strace -f -qq -o "$T/hook.trace" -- \
		setpriv --bounding-set "$(unit_bounding "$hook_unit")" --inh-caps -all --no-new-privs -- \
		"$on_change" --mount "$mnt" --state "$T/hook-state/quarantined" --hooks "$T/hooks"
) >"$T/hook.log" 2>&1 || { cat "$T/hook.log" >&2; fail "on-quarantine-change.sh failed in its unit's sandbox"; }
[[ $(cat "$T/hook.out") == "quarantined $vf" ]] || fail "the hook did not run for $vf: $(cat "$T/hook.out")"
echo 0 > "$mnt/$vf/quarantined"

# Stop: the daemon ends on SIGTERM and unmounts; strace ends with it.
kill -TERM "$daemon_pid"
wait_for 20 "vfhealthd to stop" bash -c "! kill -0 $strace_pid 2>/dev/null"
! is_mounted "$mnt" || fail "the mount outlived the daemon"

# The publisher once more, the mount gone: it keeps its copy.
rc=0; run_publisher "$T/publisher-gone.trace" || rc=$?
[[ $rc == 1 ]] || fail "the publisher with the mount gone: exit $rc, want 1"
grep -q '^vfhealth_textfile_scrape_ok 0$' "$T/textfile/vfhealth.prom" || fail "the publisher did not record the failed read"

agent_pid=$(pgrep -P "$agent_strace_pid" -o) || fail "no agent under strace"
kill -TERM "$agent_pid"
wait_for 20 "the agent to stop" bash -c "! kill -0 $agent_strace_pid 2>/dev/null"

# Every system call made, against the filters.
unit_allowed "$daemon_unit" "$T/daemon.allowed"
unit_allowed "$agent_unit" "$T/agent.allowed"
outside=$(calls_outside "$T/trace" "$VFHEALTHD" "$T/daemon.allowed")
grep -qx mount "$T/trace.used" || fail "no mount(2) in the trace: did strace see the daemon?"
[[ -z $outside ]] || fail "system calls vfhealthd.service's filter would kill the daemon for: $outside"
echo "ok   vfhealthd: $(wc -l < "$T/trace.used") distinct system calls, all inside its unit's SystemCallFilter="
outside=$(calls_outside "$T/agent.trace" "$VFHEALTH_AGENT" "$T/agent.allowed")
grep -qx execve "$T/agent.trace.used" || fail "the agent never ran its probe"
[[ -z $outside ]] || fail "system calls vfhealth-agent.service's filter would kill the agent for: $outside"
echo "ok   vfhealth-agent: $(wc -l < "$T/agent.trace.used") distinct system calls, all inside its unit's SystemCallFilter="
unit_allowed "$textfile_unit" "$T/textfile.allowed"
# The publisher is a script: its calls are those of bash and of every tool it runs.
for t in publisher publisher-gone; do
	outside=$(calls_outside "$T/$t.trace" "$publish" "$T/textfile.allowed")
	[[ -z $outside ]] || fail "system calls vfhealth-textfile.service's filter would kill the publisher for ($t): $outside"
done
echo "ok   vfhealth-textfile.sh: $(sort -u "$T"/publisher*.trace.used | wc -l) distinct system calls, all inside its unit's SystemCallFilter="
unit_allowed "$hook_unit" "$T/hook.allowed"
outside=$(calls_outside "$T/hook.trace" "$on_change" "$T/hook.allowed")
[[ -z $outside ]] || fail "system calls vfhealth-quarantine.service's filter would kill the hook runner for: $outside"
echo "ok   on-quarantine-change.sh and a hook: $(wc -l < "$T/hook.trace.used") distinct system calls, all inside its unit's SystemCallFilter="
echo "sandbox OK"
