#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Many clients at once: readers that close right after their reply (bash's
# `read` does), directory walkers, a reporter, a claimer and pollers, all
# against one daemon built with ASan.  Every client must succeed, the state
# must add up, and the daemon must stop cleanly (no use-after-free, no leak).
source "$(dirname "$0")/lib.sh"
require_fuse
start_daemon

make_vfs V W
put "$MNT/threshold" 1000
ROUNDS=60

readers() {
	local i x
	for ((i = 0; i < ROUNDS * 4; i++)); do
		read -r x <"$MNT/threshold" && [[ $x == 1000 ]] || return 1
		read -r x <"$V/tally" || return 1
		read -r x <"$MNT/metrics" || return 1
	done
}

walkers() {
	local i err
	for ((i = 0; i < ROUNDS; i++)); do
		# A claim released between readdir and stat vanishes, as a process
		# does under /proc: ls then says so and exits 1.  Anything else is
		# a failure.
		if ! err=$(ls -lR "$MNT" 2>&1 >/dev/null); then
			[[ -n $err ]] || return 1
			if grep -v "/assignments/vm-[0-9]*': No such file or directory$" <<<"$err" |
				grep -q .; then
				echo "$err" >&2
				return 1
			fi
		fi
	done
}

reporter() {
	local i
	for ((i = 0; i < ROUNDS; i++)); do
		echo "failed vm-$i 2026-11-29T07:00:00Z load" >"$V/report" || return 1
	done
}

claimer() {
	local i
	for ((i = 0; i < ROUNDS; i++)); do
		touch "$W/assignments/vm-$i" && rm "$W/assignments/vm-$i" || return 1
	done
}

pollers() {
	local i
	for ((i = 0; i < ROUNDS / 2; i++)); do
		# Opens, reads, polls briefly and closes: handles come and go
		# while the notifier wakes them.
		"$VFTOOL" poll "$V/tally" 20 >/dev/null || true
	done
}

pids=()
for job in readers readers walkers reporter claimer pollers; do
	"$job" &
	pids+=("$!")
done
for pid in "${pids[@]}"; do
	wait "$pid" || fail "a concurrent client failed (pid $pid)"
done

assert_cat "$V/tally" "$ROUNDS"
assert_eq "$(wc -l <"$V/failures")" "$ROUNDS" "failure lines"
assert_eq "$(ls "$W/assignments")" "" "claims after claim/release rounds"
assert_cat "$MNT/resources" $'total_slots 2\nused_slots 0\nallocatable_slots 2\nquarantined_slots 0'
stop_daemon
echo "ok"
