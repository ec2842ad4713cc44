#!/usr/bin/env bash
# read-flood.sh - an unprivileged user who reads cannot stall the writers
# (docs/security.md, the readers' share; fs/loop.c).  Uid 65534 reads a
# VF's history of 1,000 lines one byte at a time at offset 0 in 32 threads,
# each read rendering the whole file from SQLite on a FUSE worker; root
# meanwhile makes claims on another VF (create and close, as a VM manager
# does; each removed before the next).  A worker takes a writer's request
# before any reader's, and one uid's reads hold at most a share of the
# workers, so a claim waits behind none of her reads: its median time stays
# within 3x of its baseline, measured in the same run, interleaved (a round
# alone, then a round under her reads, several times).  The ratio is the
# median of every claim under her reads over the median of every claim of
# the baseline rounds (one FIFO queue of requests made it about 1000x).
# She must really have read meanwhile (her reads are counted), so the test
# cannot pass by her failing.
set -euo pipefail
# shellcheck source=../crash/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../crash/lib.sh"
flood=${READ_FLOOD:?READ_FLOOD must name read-flood (set by meson)}
require_fuse
command -v setpriv >/dev/null || skip "setpriv (util-linux) is missing"
max_ratio=${READ_FLOOD_MAX_RATIO:-3}
rounds=${READ_FLOOD_ROUNDS:-5}
claims_per_round=${READ_FLOOD_CLAIMS:-100}
threads=32

start_daemon --no-sentinel
V=$MNT/0000:41:00.1 # what she reads
W=$MNT/0000:41:00.2 # where root claims
[[ $(vfio mkdir "$V") == ok ]] || fail "mkdir $V"
[[ $(vfio mkdir "$W") == ok ]] || fail "mkdir $W"
echo 1000 >"$MNT/threshold"
# 1,000 failures: 1,000 lines of history, each read renders them all.
exec 3>>"$V/report"
for ((i = 0; i < 1000; i++)); do
	echo "failed vm-$i - NVRM: GPU 0000:00:05.0: RmInitAdapter failed! (0x22:0x65:884)" >&3 ||
		fail "report $i refused"
done
exec 3>&-
lines=$(wc -l <"$V/history")
((lines == 1000)) || fail "the history has $lines lines, not 1000"

median() { sort -n "$@" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
n=0
# claims FILE: claims_per_round claim creations, their microseconds into
# FILE; fewer after 10 s (a stalled daemon: ~3 s a claim)
claims() {
	"$flood" claims "$W/assignments" "$n" "$claims_per_round" 10 >"$1" || fail "claims failed"
	n=$((n + $(wc -l <"$1")))
}

claims "$T/warm" # the first claims cost more
for ((round = 1; round <= rounds; round++)); do
	claims "$T/base$round"
	mkfifo "$T/flood$round.in" "$T/flood$round.out"
	exec {fin}<>"$T/flood$round.in" {fout}<>"$T/flood$round.out"
	background setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$flood" read "$V/history" "$threads" <"$T/flood$round.in" >"$T/flood$round.out"
	read -r -t 240 -u "$fout" word before || word=nothing
	[[ $word == reading ]] || fail "the reader did not start ($word)"
	claims "$T/hostile$round"
	echo stop >&"$fin"
	read -r -t 240 -u "$fout" word after _ errors || word=nothing
	[[ $word == read ]] || fail "the reader did not stop ($word)"
	exec {fin}>&- {fout}<&-
	((errors == 0)) || fail "$errors of her reads failed"
	# She kept reading while the claims were made (a render takes about a
	# millisecond and they are made in some 50 ms: about 50 reads), so
	# the claims were not fast for want of her reads.
	((after - before >= threads / 2)) ||
		fail "she read only $((after - before)) times while $(wc -l <"$T/hostile$round") claims were made"
	echo "round $round: median claim: alone $(median "$T/base$round") us," \
		"under $((after - before)) reads of $lines lines $(median "$T/hostile$round") us"
done
base=$(median "$T"/base*)
hostile=$(median "$T"/hostile*)
ratio=$(awk -v h="$hostile" -v b="$base" 'BEGIN { printf "%.2f", h / b }')
echo "claim creation: median alone $base us, under her reads $hostile us:" \
	"ratio $ratio over $rounds rounds (at most $max_ratio)"
awk -v r="$ratio" -v m="$max_ratio" 'BEGIN { exit !(r <= m) }' ||
	fail "a claim under an unprivileged reader takes $ratio times its baseline (more than $max_ratio)"
stop_daemon
