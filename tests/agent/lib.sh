# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# tests/agent/lib.sh - the agent suite's own helpers on top of the harness
# (tests/lib/harness.sh: temp dir $T, cleanup, skip/fail, wait_until).  No
# sleeps as synchronization: every wait is a retry-until-deadline loop on a
# condition, or a blocking open/wait on a real event.
#
# Environment (set by tests/agent/meson.build): VFHEALTH_AGENT, AGENT_PEER.
# shellcheck source=../lib/harness.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"

AGENT=${VFHEALTH_AGENT:?VFHEALTH_AGENT must name vfhealth-agent (set by meson)}
PEER=${AGENT_PEER:?AGENT_PEER must name agent-peer (set by meson)}
# The agent's log is what a failure shows (the harness tails DAEMON_LOG).
LOG=$T/agent.log
DAEMON_LOG=$LOG

# query EP: run vfhealth-agent --query; sets Q_RC and Q_OUT.
query() {
	Q_RC=0
	Q_OUT=$("$AGENT" --query "$1" --timeout "${2:-2}" 2>&1) || Q_RC=$?
}

query_is() { query "$1"; [ "$Q_RC" -eq "$2" ]; }

# The agent logs every judged kernel record at debug level: wait for TEXT.
logged() { grep -qF -- "$1" "$LOG"; }

# Total context switches of every thread of PID.
ctxt_switches() {
	local total=0 n
	for f in /proc/"$1"/task/*/status; do
		n=$(awk '/ctxt_switches/ { s += $2 } END { print s }' "$f")
		total=$((total + n))
	done
	echo "$total"
}
