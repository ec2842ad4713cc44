# Shared helpers for the vfhealth-agent integration scripts (sourced).
# No sleeps as synchronization: every wait is a retry-until-deadline loop
# on a condition, or a blocking open/wait on a real event.

fail() { echo "FAIL: $*" >&2; [ -n "${LOG:-}" ] && [ -f "$LOG" ] && tail -30 "$LOG" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

# until_deadline SECONDS CMD...: retry CMD until it succeeds or time is up.
until_deadline() {
	local limit=$1; shift
	local end=$(( $(date +%s%N) + limit * 1000000000 ))
	until "$@"; do
		[ "$(date +%s%N)" -lt "$end" ] || return 1
		# poll interval of the retry loop, not a synchronization point
		sleep 0.02
	done
}

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
