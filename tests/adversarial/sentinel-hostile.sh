#!/usr/bin/env bash
# sentinel-hostile.sh - agents that send garbage, a 2 GiB frame length, a
# valid frame one byte per second, half a frame then hang up, a response of
# the wrong type, or accept connections and never answer (they pile up by
# the thousand), polled by vfhealthd's sentinel next to agents that behave.
#
# Over 100 polls (fast interval, short deadline): every hostile target is
# counted rpc_error in every poll and nothing else; the behaving targets
# still answer ok/failed in every poll and the failure is reported; no poll
# takes much longer than one deadline; vfhealthd's open files and resident
# memory stay flat.
set -euo pipefail
# shellcheck source=../crash/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../crash/lib.sh"
adversary_bin=${ADVERSARY:?ADVERSARY must name the adversary (set by meson)}

require_fuse

polls=${HOSTILE_POLLS:-100}
timeout_s=0.2
# Hostile targets by mode; "silent" ones hold every connection they accept.
hostile=(garbage:2 huge:2 trickle:2 half:2 wrongtype:2 silent:10)
n_hostile=20 n_ok=3 n_failed=1

adir=$T/a
mkdir -p "$adir"
mkfifo "$T/adversary.in"
exec {adv_in}<>"$T/adversary.in" # held open: the adversary stops when we exit
background "$adversary_bin" "$adir" "${hostile[@]}" ok:$n_ok failed:$n_failed \
	<"$T/adversary.in" >"$T/adversary.out" 2>&1
wait_for 30 "the agents to listen" grep -qx ready "$T/adversary.out"

mnt=$MNT
# Under ASan, freed memory waits in a quarantine (256 MiB by default) before
# reuse, which would read as growth: keep it small so RSS shows real leaks.
DAEMON_ENV=(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1:thread_local_quarantine_size_kb=64")
start_daemon --poll-interval 0.05 --poll-timeout "$timeout_s" \
	--concurrency 64 --no-reconcile

# One VF and one claim per target; the claim names the target's socket.
n=0
declare -A vf_of
for sock in "$adir"/*-*.sock; do
	name=$(basename "$sock" .sock)
	vf=$(printf '0000:5%x:%02x.%d' $((n / 64)) $(((n / 8) % 8)) $((n % 8)))
	vf_of[$name]=$vf
	[[ $(vfio mkdir "$mnt/$vf") == ok ]] || fail "mkdir $vf"
	[[ $(vfio create "$mnt/$vf/assignments/vm-$name") == ok ]] || fail "claim $vf"
	got=$(vfio write "$mnt/$vf/assignments/vm-$name" \
		"agent=unix:$sock"$'\n'"control=$adir/control.sock"$'\n')
	[[ $got == ok ]] || fail "claim attributes for $name: $got"
	n=$((n + 1))
done
((n == n_hostile + n_ok + n_failed)) || fail "expected $((n_hostile + n_ok + n_failed)) targets, made $n"

metric() { # metric NAME_WITH_LABELS < metrics
	awk -v m="$1" '$1 == m { print $2 }'
}
checks() { metric "vfhealth_sentinel_checks_total{result=\"$1\"}" <<<"$metrics"; }
snapshot() { # snapshot PREFIX: counters, open files and RSS of vfhealthd
	metrics=$(vf_read "$mnt/metrics")
	local r
	eval "${1}_polls=$(metric vfhealth_sentinel_polls_total <<<"$metrics")"
	for r in ok failed unknown rpc_error unsupported_agent; do
		eval "${1}_$r=$(checks $r)"
	done
	eval "${1}_fds=$(find "/proc/$DAEMON_PID/fd" -mindepth 1 -maxdepth 1 | wc -l)"
	eval "${1}_rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$DAEMON_PID/status")"
}
polls_at_least() {
	metrics=$(vf_read "$mnt/metrics")
	local p duration
	p=$(metric vfhealth_sentinel_polls_total <<<"$metrics")
	duration=$(metric vfhealth_sentinel_last_poll_duration_seconds <<<"$metrics")
	[[ -n $duration ]] && echo "$duration" >>"$T/durations"
	# Descriptors in use right now (a poll in flight holds one per target).
	find "/proc/$DAEMON_PID/fd" -mindepth 1 -maxdepth 1 | wc -l >>"$T/fds"
	((${p:-0} >= $1))
}

# Warm up: every claim is in the target list and the allocators settled.
wait_for 60 "10 polls with all targets" polls_at_least 10
snapshot a
: >"$T/durations"
: >"$T/fds"
wait_for $((polls * 2)) "$polls more polls" polls_at_least $((a_polls + polls))
snapshot b

d_polls=$((b_polls - a_polls))
expect_per_poll() { # expect_per_poll RESULT TARGETS DELTA
	# A poll may be half counted at either end of the window.
	local lo=$(($2 * (d_polls - 1))) hi=$(($2 * (d_polls + 1)))
	(($3 >= lo && $3 <= hi)) ||
		fail "result $1: $3 checks over $d_polls polls of $2 targets (want $lo..$hi)"
	pass "result $1: $3 checks over $d_polls polls of $2 targets"
}
expect_per_poll rpc_error $n_hostile $((b_rpc_error - a_rpc_error))
expect_per_poll ok $n_ok $((b_ok - a_ok))
expect_per_poll failed $n_failed $((b_failed - a_failed))
((b_unknown == a_unknown && b_unsupported_agent == a_unsupported_agent)) ||
	fail "hostile answers were counted as unknown/unsupported_agent"

# The failing agent's assignment was reported once; nobody else was.
for name in "${!vf_of[@]}"; do
	want=0
	[[ $name == failed-* ]] && want=1
	got=$(vf_read "$mnt/${vf_of[$name]}/tally")
	[[ $got == "$want" ]] || fail "$name: tally $got, want $want"
done

# One deadline per poll (all targets run at once): the typical poll takes
# about one deadline, and none is held much longer by a peer (the trickle
# alone would take half a minute); the slack is for a loaded CI machine.
read -r median_duration max_duration < <(sort -g "$T/durations" |
	awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)], v[NR] }')
awk -v d="$median_duration" -v t="$timeout_s" 'BEGIN { exit !(d <= t + 0.3) }' ||
	fail "the median poll took ${median_duration}s with a ${timeout_s}s deadline"
awk -v d="$max_duration" -v t="$timeout_s" 'BEGIN { exit !(d <= t * 10) }' ||
	fail "a poll took ${max_duration}s with a ${timeout_s}s deadline"

# Flat: no descriptor leaked per poll, memory bounded (ASan's quarantine and
# allocator caches grow a little on their own).
# Descriptors: the fewest open at any sample (between polls) among the first
# and among the last 20 samples; a leak per poll would add ~100.
fds_first=$(head -n 20 "$T/fds" | sort -n | head -n 1)
fds_last=$(tail -n 20 "$T/fds" | sort -n | head -n 1)
((fds_last - fds_first <= 2)) ||
	fail "vfhealthd open files grew from $fds_first to $fds_last over $d_polls polls"
((b_rss - a_rss <= ${HOSTILE_RSS_SLACK_KB:-8192})) ||
	fail "vfhealthd RSS grew from ${a_rss} KiB to ${b_rss} KiB over $d_polls polls"
kill -0 "$DAEMON_PID" || fail "vfhealthd died"
stop_daemon
echo "sentinel-hostile: $d_polls polls, $n_hostile hostile targets: rpc_error +$((b_rpc_error - a_rpc_error)), ok +$((b_ok - a_ok)), failed +$((b_failed - a_failed)); poll median ${median_duration}s, max ${max_duration}s; fds $fds_first -> $fds_last; RSS $a_rss -> $b_rss KiB"
