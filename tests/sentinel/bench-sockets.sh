#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The figure "one poll with 60 claims while 100,000 Unix sockets exist"
# (docs/benchmarks.md): the sentinel learns which control sockets listen
# from the kernel's socket diagnostics, once per pass and network
# namespace, so a crowded socket table (made here by a helper holding
# BENCH_SOCKETS sockets, as any local user may) must not make each claim
# cost a read of the whole table.  Prints the median last-poll duration of
# BENCH_POLLS polls without and then with the crowd.
#   meson test -C BUILD --benchmark --verbose sentinel-sockets
source "$(dirname "$0")/lib.sh"

CLAIMS=${BENCH_CLAIMS:-60}
SOCKETS=${BENCH_SOCKETS:-100000}
POLLS=${BENCH_POLLS:-5}

start_daemon --poll-interval 0.5 --poll-timeout 5 --no-reconcile
start_agent g1
agent_make_ok g1
start_vmm g1
for i in $(seq 1 "$CLAIMS"); do
	vf=$(printf '0000:42:%02x.%d' $((i / 8)) $((i % 8)))
	register_vf "$vf"
	claim "$vf" "vm-$i" "agent=hvsock:$T/g1.hv:2222" "control=$T/g1.ctl"
done

# median_poll: the median of POLLS successive last-poll durations, after one
# full poll of every claim.
median_poll() {
	local samples=() i
	wait_polls 2 60
	for ((i = 0; i < POLLS; i++)); do
		wait_polls 1 60
		samples+=("$(metric vfhealth_sentinel_last_poll_duration_seconds)")
	done
	printf '%s\n' "${samples[@]}" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}

[[ $(metric 'vfhealth_sentinel_checks_total{result="ok"}') -ge 0 ]]
QUIET=$(median_poll)
mkfifo "$T/crowd.out"
"$TEST_VMM" --sockets "$SOCKETS" >"$T/crowd.out" &
BG_PIDS+=("$!")
read -r -t 120 ready <"$T/crowd.out" || ready=
[[ $ready == ready ]] || fail "the helper did not make $SOCKETS sockets"
CROWDED=$(median_poll)
OKS=$(metric 'vfhealth_sentinel_checks_total{result="ok"}')
((OKS >= CLAIMS * POLLS)) || fail "only $OKS ok checks: not every claim was polled"
echo "one poll of $CLAIMS claims: ${QUIET} s; with $SOCKETS more Unix sockets: ${CROWDED} s"
