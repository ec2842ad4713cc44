#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/bench/lib.sh - the benchmark scripts' shared way of printing a
# figure and counting the ones that miss their target; sourced after the
# harness (or tests/crash/lib.sh) by run-benchmarks.sh and detect-latency.sh.

# figure NAME VALUE UNIT LIMIT LIMIT_UNIT OP TARGET: OP is <= or >=; the
# ratio is VALUE / LIMIT.
missed=0
figure() {
	local line
	line=$(awk -v n="$1" -v v="$2" -v u="$3" -v l="$4" -v lu="$5" -v op="$6" -v t="$7" 'BEGIN {
		r = (l > 0) ? v / l : 0
		ok = (op == "<=") ? (r <= t) : (r >= t)
		printf "%s: %s %s (limit: %s %s) ratio %.2f target %s %.2f [%s]\n", n, v, u, l, lu, r, op, t, ok ? "ok" : "MISSED"
	}')
	echo "$line"
	[[ $line == *"[ok]" ]] || missed=$((missed + 1))
}
load() { cut -d' ' -f1-3 /proc/loadavg; }
