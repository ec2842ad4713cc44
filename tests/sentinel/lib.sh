# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# tests/sentinel/lib.sh - the sentinel suite's own helpers on top of the
# harness (tests/lib/harness.sh: temp dir, cleanup, a real vfhealthd on $MNT,
# waits): claims on the mount, the metrics, real vfhealth-agent processes on
# Unix sockets fed from FIFOs of kmsg records with a fake nvidia-smi, and
# test-vmm processes in front of them.  Sourced by every test-*.sh here.
#
# Programs come from the environment meson sets: VFHEALTHD, VFHEALTH_AGENT,
# VFHEALTH_SENTINEL, TEST_VMM.  Waiting is on conditions with a deadline
# (wait_for), never a blind sleep.
# shellcheck source=../lib/harness.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"

: "${VFHEALTH_AGENT:?}" "${TEST_VMM:?}"

# The sentinel polls through the mount: a daemon that dies without
# unmounting must not leave the test hanging on it.
DAEMON_WATCHDOG=1

register_vf() {
	mkdir "$MNT/$1"
}

# claim VF INSTANCE KEY=VALUE...: create the claim, then set its keys in one write.
# claim VF ID [KEY=VALUE...]: one claim with every attribute, made through
# the open that creates it (a refused claim leaves nothing).
claim() {
	local vf=$1 id=$2 content=""
	shift 2
	local kv
	for kv in "$@"; do
		content+="$kv"$'\n'
	done
	if [[ -z $content ]]; then
		: >"$MNT/$vf/assignments/$id"
	else
		write_once "$MNT/$vf/assignments/$id" "$content"
	fi
}

# release VF ID: as a VMM manager does once its VMM is gone, by claimed_at
# (rm refuses while the claim's VMM may run).
release() {
	write_once "$MNT/$1/assignments/$2" "release=$(claimed_at "$1" "$2")"
}

claimed_at() {
	sed -n 's/^claimed_at=//p' "$MNT/$1/assignments/$2"
}

# metric NAME_WITH_LABELS: its value in $MNT/metrics (or $METRICS_FILE when
# set, for the standalone sentinel); empty when absent.
metric() {
	local file=${METRICS_FILE:-$MNT/metrics}
	[[ -f $file ]] || return 0
	awk -v name="$1" '$1 == name { print $2 }' "$file"
}

# metric_ge NAME N: the metric exists and is >= N.
metric_ge() {
	local v
	v=$(metric "$1")
	[[ -n $v ]] && awk -v v="$v" -v n="$2" 'BEGIN { exit !(v + 0 >= n + 0) }'
}

polls() {
	local v
	v=$(metric vfhealth_sentinel_polls_total)
	echo "${v:-0}"
}

# wait_polls N: wait until N more polls have completed than now.
wait_polls() {
	local target=$(($(polls) + $1))
	wait_for "${2:-30}" "$1 more sentinel polls" metric_ge vfhealth_sentinel_polls_total "$target"
}

file_is() {
	[[ "$(cat "$1")" == "$2" ]]
}

# ---- guest agents ----------------------------------------------------------

# A fake sysfs with one NVIDIA device, shared by every agent.
make_sysfs() {
	if [[ ! -d $T/sysfs ]]; then
		mkdir -p "$T/sysfs/bus/pci/devices/0000:00:03.0"
		echo 0x10de >"$T/sysfs/bus/pci/devices/0000:00:03.0/vendor"
	fi
}

# start_agent NAME: vfhealth-agent on unix:$T/NAME.sock reading kmsg records
# from the FIFO $T/NAME.kmsg; its nvidia-smi succeeds once $T/NAME.smi-ok
# exists (agent_make_ok), fails before.
start_agent() {
	local name=$1
	make_sysfs
	mkfifo "$T/$name.kmsg"
	cat >"$T/$name.nvidia-smi" <<EOF
#!/bin/sh
[ -e "$T/$name.smi-ok" ] && { echo "GPU 0: NVIDIA A100 (UUID: GPU-fake)"; exit 0; }
echo "No devices were found" >&2
exit 6
EOF
	chmod +x "$T/$name.nvidia-smi"
	"$VFHEALTH_AGENT" --listen "unix:$T/$name.sock" --kmsg "$T/$name.kmsg" \
		--sysfs-root "$T/sysfs" --nvidia-smi "$T/$name.nvidia-smi" --dev-dir "$T" \
		--probe-interval "${AGENT_PROBE_INTERVAL:-0.1}" >>"$T/$name.log" 2>&1 &
	BG_PIDS+=("$!")
	wait_for 20 "agent $name listening" test -S "$T/$name.sock"
}

# agent_state NAME: ok | failed | unknown | error (from --query's exit status).
agent_state() {
	local rc=0
	"$VFHEALTH_AGENT" --query "unix:$T/$1.sock" --timeout 2 >/dev/null 2>&1 || rc=$?
	case $rc in
	0) echo ok ;;
	1) echo failed ;;
	2) echo unknown ;;
	*) echo error ;;
	esac
}

agent_is() {
	[[ "$(agent_state "$1")" == "$2" ]]
}

# agent_fail NAME: feed one kernel NVRM failure record; wait until it shows.
agent_fail() {
	local name=$1
	# Bounded: a FIFO write blocks until the agent has it open.
	timeout 20 sh -c 'echo "$1" >"$2"' sh \
		"3,$RANDOM,$((SECONDS * 1000000)),-;NVRM: GPU 0000:00:03.0: RmInitAdapter failed! (0x22:0x65:884)" \
		"$T/$name.kmsg" || fail "agent $name does not read its kmsg FIFO"
	wait_for 20 "agent $name FAILED" agent_is "$name" failed
}

# agent_make_ok NAME: let its nvidia-smi succeed; wait until it says OK.
agent_make_ok() {
	: >"$T/$1.smi-ok"
	wait_for 20 "agent $1 OK" agent_is "$1" ok
}

# ---- VMMs -------------------------------------------------------------------

# start_vmm NAME [test-vmm options...]: hybrid vsock at $T/NAME.hv, control
# socket at $T/NAME.ctl.  Default: proxy to the agent NAME.
start_vmm() {
	local name=$1
	shift
	local args=("$@")
	if [[ ${#args[@]} -eq 0 ]]; then
		args=(--agent "unix:$T/$name.sock")
	fi
	"$TEST_VMM" --hvsock "$T/$name.hv" --control "$T/$name.ctl" "${args[@]}" \
		>>"$T/$name.vmm.log" 2>&1 &
	BG_PIDS+=("$!")
	wait_for 20 "vmm $name sockets" test -S "$T/$name.ctl"
	wait_for 20 "vmm $name sockets" test -S "$T/$name.hv"
}

# start_dead_vmm NAME [ARGS...]: a VMM that bound its control socket and was
# SIGKILLed, leaving the socket file with nobody listening.
start_dead_vmm() {
	start_vmm "$@"
	kill -KILL "${BG_PIDS[-1]}"
	wait "${BG_PIDS[-1]}" 2>/dev/null || true
	test -S "$T/$1.ctl" || fail "SIGKILL removed the control socket file"
}

# start_sleeper VAR: a running process of ours that is no VMM (sleep), its
# pid in VAR; ended at exit.
start_sleeper() {
	sleep 3600 {TAP_FD}>&- &
	BG_PIDS+=("$!")
	printf -v "$1" %s "$!"
}

# start_failing_guests NAME...: for each NAME an agent and a VMM in front of
# it, every agent then fed a failure record (FAILED).
start_failing_guests() {
	local g
	for g; do start_agent "$g"; done
	for g; do start_vmm "$g"; done
	for g; do agent_fail "$g"; done
}

lines_in() {
	if [[ -f $1 ]]; then wc -l <"$1"; else echo 0; fi
}

# lines_at_least FILE N (for wait_for: evaluated on every try)
lines_at_least() {
	(($(lines_in "$1") >= $2))
}
