#!/usr/bin/env bash
# run-benchmarks.sh BUILD_DIR - the figures of docs/benchmarks.md, one line
# each, every one a ratio against a limit measured in the same run (or, for
# the footprint figures, against the target itself):
#
#   NAME: VALUE UNIT (limit: VALUE UNIT) ratio X.XX target <= T [ok|MISSED]
#
# Use an optimized build without sanitizers (ASan multiplies memory and
# time).  Knobs (environment): BENCH_READ_BATCHES (1000) and BENCH_READ_BATCH
# (100 reads), BENCH_LS_ROUNDS (200), BENCH_INGEST_1 (200 reports),
# BENCH_INGEST_64 (1280 reports), BENCH_PAIRS (5: alternating pairs per
# ingest figure; the median pair is shown), BENCH_ALTERNATE (800 reports
# each side of an interleaved ingest figure, in batches of
# BENCH_ALTERNATE_BATCH, 50, to BENCH_ALTERNATE_VFS fresh VFs, 4; the
# median of BENCH_ALTERNATE_RUNS such runs, 11),
# BENCH_DISK_DIR (a directory on the disk the database would live on;
# default under BUILD_DIR), BENCH_IDLE_S (agent idle window, 20 s),
# BENCH_ONLY=fs (only the mount's figures and the request counts: reads,
# listings, ingest), BENCH_SYSCALL_REPORTS (200: reports traced for the
# system calls a report costs; needs strace, else skipped),
# BENCH_WARM_REPORTS (400: untimed reports that bring a store to its steady
# state before its ingest is timed).
# Run by `meson test -C BUILD_DIR --benchmark`, which sets the programs'
# paths in the environment (tests/bench/meson.build), as for every suite.
set -euo pipefail
build=$(cd "${1:?usage: run-benchmarks.sh BUILD_DIR}" && pwd)
# shellcheck source=../crash/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../crash/lib.sh"
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vfbench=${VFBENCH:?VFBENCH must name vfbench (set by meson)}
agent_bin=${VFHEALTH_AGENT:?}
adversary_bin=${ADVERSARY:?ADVERSARY must name the adversary (set by meson)}
: "${FUSEFLOOR:?FUSEFLOOR must name fusefloor (set by meson)}"
: "${REPORTFLOOR:?REPORTFLOOR must name reportfloor (set by meson)}"
require_fuse

# The state the current ingest is measured against (ingest_vs_baseline): the
# last commit whose ingest (one durable report through VF/report) was
# measured faster than what came after it (335-354 us a report against
# 514-518 us, side by side in one run).  There is no release tag yet to pin
# instead.  baseline.sh builds it once under BUILD_DIR/bench-baseline.
baseline_commit=5208bf3565a156e4dac40e93b4dbc78bae688331

ls_rounds=${BENCH_LS_ROUNDS:-200}
ingest_1=${BENCH_INGEST_1:-200}
ingest_64=${BENCH_INGEST_64:-1280}
idle_s=${BENCH_IDLE_S:-20}
disk=${BENCH_DISK_DIR:-$build/bench-disk}
rm -rf -- "$disk" && mkdir -p "$disk"
on_exit "rm -rf -- '$disk'"
shm=$T/shm # fast scratch for databases whose fsyncs are not measured
mount_tmpfs "$shm" 512m

ms() { awk -v ns="$1" 'BEGIN { printf "%.3f", ns / 1e6 }'; }
us() { awk -v ns="$1" 'BEGIN { printf "%.1f", ns / 1e3 }'; }
vf_name() { printf '0000:%02x:%02x.%d' $((0x80 + $1 / 256)) $((($1 / 8) % 32)) $(($1 % 8)); }

echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname): $(nproc) CPUs, $(awk -F': *' '/model name/ { print $2; exit }' /proc/cpuinfo), kernel $(uname -r), load average $(load)"

# -- 1024 VFs: reads, listings, ingest ---------------------------------------------
"$vfbench" populate "$shm/v1024.db" 1024 0 >/dev/null 2>&1
cp -- "$shm/v1024.db" "$disk/vfhealth.db"
mnt=$MNT
DB=$disk/vfhealth.db
start_daemon --threshold 1000 --no-sentinel
vf=$(vf_name 5)

# The same tree on tmpfs: 1024 directories of the same files, the same top
# files, their names taken from the mount so that a new file cannot make
# the two listings differ.
tree=$shm/tree
mkdir -p "$tree"
mapfile -t top_files < <(find "$mnt" -mindepth 1 -maxdepth 1 -type f -printf '%f\n')
mapfile -t vf_files < <(find "$mnt/$vf" -mindepth 1 -maxdepth 1 -type f -printf '%f\n')
((${#top_files[@]} > 5 && ${#vf_files[@]} > 5)) || fail "the mount lists ${#top_files[@]} top files, ${#vf_files[@]} VF files"
for f in "${top_files[@]}"; do echo 0 >"$tree/$f"; done
mkdir "$tree/gpus" # no parent GPU registered: empty, as the mount's
for ((i = 0; i < 1024; i++)); do
	d=$tree/$(vf_name $i)
	mkdir -p "$d/assignments"
	for f in "${vf_files[@]}"; do echo 0 >"$d/$f"; done
done

# A shared machine's speed drifts within seconds: each figure and its limit
# are measured interleaved (vfbench reads/lss: batches of every file in
# turn, or rounds of every directory in turn, in one process; ingest:
# alternating short runs), so that both see the same machine, and each
# prints the load average before and after it.  Figures only mean something
# from a quiet machine (load average below 0.5): docs/benchmarks.md.
read_batches=${BENCH_READ_BATCHES:-1000}
read_batch=${BENCH_READ_BATCH:-100}
# The floor: a FUSE server that only answers (fusefloor.c), serving a
# keep_cache file as VF/quarantined is served and a direct_io list as the
# top-level lists are, with the same content: with libfuse's multi-threaded
# loop (16 threads at most, what vfhealthd ran before fs/loop.c), and from
# one thread (what vfhealthd's receiving thread does for a read).
floor=$T/floor floor1=$T/floor1
mkdir -p "$floor" "$floor1"
# One VF out of service, so that the top-level list has a line to read.
[[ $(vfio write "$mnt/$(vf_name 1000)/quarantined" 1) == ok ]] || fail "hold $(vf_name 1000)"
vf_read "$mnt/quarantined" >"$tree/quarantined"
background "$FUSEFLOOR" "$floor" "$tree/quarantined"
background "$FUSEFLOOR" "$floor1" "$tree/quarantined" 0
EXTRA_MOUNTS+=("$floor" "$floor1")
wait_for 10 "fusefloor to mount" is_mounted "$floor"
wait_for 10 "fusefloor to mount" is_mounted "$floor1"
cmp -s <(cat "$floor/list") "$tree/quarantined" || fail "fusefloor's list differs from the mount's"

# reads NAME TARGET FILE: FILE under the mount, the tmpfs tree and both floors.
reads() {
	local name=$1 target=$2 l0 fs tmpfs fl fl1
	l0=$(load)
	read -r fs tmpfs fl fl1 < <("$vfbench" reads "$read_batches" "$read_batch" \
		"$mnt/$3" "$tree/$3" "$floor/$4" "$floor1/$4")
	echo "#   ($name: $read_batches interleaved batches of $read_batch, medians of the batch means:" \
		"mount $(us "$fs") us, tmpfs $(us "$tmpfs") us, FUSE floor $(us "$fl") us" \
		"(mount/floor $(awk -v a="$fs" -v b="$fl" 'BEGIN { printf "%.2f", a / b }')), one-thread" \
		"FUSE floor $(us "$fl1") us ($(awk -v a="$fl1" -v b="$tmpfs" 'BEGIN { printf "%.2f", a / b }')x tmpfs);" \
		"load average before $l0, after $(load))"
	figure "$name" "$(us "$fs")" us "$(us "$tmpfs")" us "<=" "$target"
	figure "${name}_vs_fuse_floor" "$(us "$fs")" us "$(us "$fl")" us "<=" 1.00
}
reads read_quarantined_median 8 "$vf/quarantined" quarantined
reads read_top_quarantined_median 12 quarantined list

l0=$(load)
read -r fs_ls fs_entries tmpfs_ls tmpfs_entries < <("$vfbench" lss "$ls_rounds" "$mnt" "$tree")
((fs_entries == tmpfs_entries)) || fail "listing: $fs_entries entries on the mount, $tmpfs_entries on tmpfs"
echo "#   (ls_l_1024_vfs: $ls_rounds interleaved listings of each, medians; load average before $l0, after $(load))"
figure ls_l_1024_vfs_median "$(ms "$fs_ls")" ms "$(ms "$tmpfs_ls")" ms "<=" 1.2

pairs_n=${BENCH_PAIRS:-5}
# median_pair: "VALUE LIMIT" lines in, the line whose VALUE/LIMIT is the median out.
median_pair() { awk '{ print $1 / $2, $1, $2 }' | sort -g | awk '{ l[NR] = $2 " " $3 } END { print l[int((NR + 1) / 2)] }'; }
# runs NAME N WHAT COMMAND: N runs of COMMAND, each printing "A B" (it
# sees the run's index as $i); the raw pairs and the load average before
# and after are echoed as a comment, the median pair printed.
runs() {
	local name=$1 n=$2 what=$3 cmd=$4 i lines="" l0
	l0=$(load)
	for ((i = 0; i < n; i++)); do lines+="$(eval "$cmd")"$'\n'; done
	echo "#   ($name, $n $what: $(tr '\n' ';' <<<"${lines%$'\n'}"); load average before $l0, after $(load))" >&2
	median_pair <<<"${lines%$'\n'}"
}
# paired NAME COMMAND_A COMMAND_B: pairs_n runs, each A, then B (either
# failing fails the run: the substitution's status is runs()'s assignment's).
paired() { runs "$1" "$pairs_n" "alternating pairs" "a=\$($2) && b=\$($3) && echo \"\$a \$b\""; }
# alternated NAME FILES_A FILES_B: each run `vfbench alternate`, one
# writer's reports through two sides' report files interleaved in one
# process, in batches (A B B A ...).  For two servers on one disk: a run
# that each side takes apart, as paired() does, falls on the disk's slow
# and fast spells (and a WAL checkpoint's, every ~300 reports) by chance,
# and the side that goes first is favoured; here they fall on both alike.
# A run spans several checkpoints of each side; a mount's side writes an
# equal share to each of alternate_vfs fresh VFs, as many reports each as
# paired()'s runs, so that both measure VFs of the same tallies.
alternate_n=${BENCH_ALTERNATE:-800}
alternate_batch=${BENCH_ALTERNATE_BATCH:-50}
alternate_vfs=${BENCH_ALTERNATE_VFS:-4}
((alternate_vfs >= 1 && alternate_vfs <= 16)) ||
	fail "BENCH_ALTERNATE_VFS=$alternate_vfs: 1..16 (vfbench alternate's files a side)"
# More runs than paired()'s: about one run in three is one whose serving
# thread the scheduler keeps moving between the vCPUs, which makes some
# 10% less (docs/benchmarks.md, "Runs the scheduler moves"); the median of
# eleven is a usual run's, where the median of five often fell on one.
alternate_runs=${BENCH_ALTERNATE_RUNS:-11}
((alternate_runs >= 1)) || fail "BENCH_ALTERNATE_RUNS=$alternate_runs: at least 1"
alternated() {
	runs "$1" "$alternate_runs" "runs of $alternate_n reports each side interleaved in batches of $alternate_batch" \
		"\"\$vfbench\" alternate \"\$alternate_n\" \"\$alternate_batch\" \"\$($2)\" \"\$($3)\""
}
# reports_of MOUNT FIRST: the report files of alternate_vfs VFs from the
# FIRST-th, comma-separated (vfbench alternate's side)
reports_of() {
	local k list=""
	for ((k = $2; k < $2 + alternate_vfs; k++)); do list+="${list:+,}$1/$(vf_name "$k")/report"; done
	echo "$list"
}

# syscalls_per_report NAME PID MOUNT FIRST: the system calls the daemon PID
# (every thread: strace -f -c) makes for BENCH_SYSCALL_REPORTS reports by
# one writer through MOUNT (fresh VFs from the FIRST-th), per report.  The
# daemon's read and writev are /dev/fuse's (two per FUSE request; its
# toucher is another process, not traced).  Traced, a report takes longer,
# so the toucher's paced requests (one batch per pace, 10 to 100 ms) weigh more per
# report than untraced.
syscall_reports=${BENCH_SYSCALL_REPORTS:-200}
syscalls_per_report() {
	local name=$1 pid=$2 mnt_=$3 first=$4 spid out=$T/strace-$1
	if ! command -v strace >/dev/null; then
		echo "syscalls_per_report_$name: skipped: no strace"
		return 0
	fi
	strace -f -c -o "$out" -p "$pid" 2>"$out.err" &
	spid=$!
	wait_for 10 "strace to attach" grep -q attached "$out.err"
	"$vfbench" ingest "$mnt_" 1 "$syscall_reports" "$first" >/dev/null
	kill -INT "$spid"
	wait "$spid" || true
	awk -v n="$syscall_reports" -v name="$name" '
		{ calls[$NF] = $4 }
		END {
			split("futex pwrite64 newfstatat fdatasync read writev poll write sendto epoll_ctl epoll_wait fcntl", k, " ")
			line = ""
			for (i = 1; i in k; i++)
				line = line sprintf("%s%s %.1f", i > 1 ? ", " : "", k[i], calls[k[i]] / n)
			printf "syscalls_per_report_%s: %s (strace -f -c of the daemon over %d reports, per report)\n", name, line, n
		}' "$out"
}

# Ingest is measured in the store's steady state, as the bare loop and the
# report floor are (barecommit.h): a new WAL grows with every commit, and an
# fdatasync that also syncs the file's size costs here about as much again
# as the commit, until SQLite's first checkpoint restarts the WAL, whose
# frames are then overwritten.  warm_store MOUNT VF: untimed reports to one
# VF no figure writes to, past that first checkpoint (about 230 reports).
warm_reports=${BENCH_WARM_REPORTS:-400}
warm_store() { "$vfbench" ingest "$1" 1 "$warm_reports" "$2" >/dev/null; }
# Ingest: one writer beside the bare SQLite loop on the same disk (no
# target: what any FUSE file interface pays is the floor's, below), then 64
# writers against one, each pair run back to back.  Every run writes to VFs
# no run wrote to before (the i-th pair's: FIRST below), so that no VF
# reaches the threshold and turns reports into no-ops.
warm_store "$mnt" 800
read -r one bare < <(paired ingest_1_writer \
	'"$vfbench" ingest "$mnt" 1 "$ingest_1" "$i"' \
	'"$vfbench" sqlite "$disk/baseline.db" "$ingest_1"' 2>"$T/pairs")
cat "$T/pairs"
echo "ingest_1_writer: $one reports/s, the bare SQLite loop $bare reports/s:" \
	"$(awk -v a="$one" -v b="$bare" 'BEGIN { printf "%.2f", a / b }')x (no target; the floor's ratio below)"
# Where the difference goes: the store's own API, no mount, same disk.
cp -- "$shm/v1024.db" "$disk/store-alone.db"
echo "#   (the store alone, no mount: $("$vfbench" store "$disk/store-alone.db" "$ingest_1" 600 2>/dev/null) reports/s;" \
	"bare SQLite just after: $("$vfbench" sqlite "$disk/baseline.db" "$ingest_1") reports/s)"
# The floor of a report through FUSE on this machine (reportfloor.c): a
# server mounted as vfhealthd mounts whose write only commits the bare
# loop's row, in alternating pairs with the bare loop: what any FUSE file
# interface pays for its round trips before doing anything of its own.
rfloor=$T/rfloor
mkdir -p "$rfloor"
background "$REPORTFLOOR" "$rfloor" "$disk/floor.db"
EXTRA_MOUNTS+=("$rfloor")
wait_for 10 "reportfloor to mount" is_mounted "$rfloor"
read -r rf rbare < <(paired ingest_floor \
	'"$vfbench" reports "$rfloor/report" "$ingest_1"' \
	'"$vfbench" sqlite "$disk/baseline.db" "$ingest_1"' 2>"$T/pairs")
cat "$T/pairs"
echo "#   (the floor of a report through FUSE, reportfloor.c: $rf reports/s against the bare loop's $rbare," \
	"$(awk -v a="$rf" -v b="$rbare" 'BEGIN { printf "%.2f", a / b }')x, the median pair;" \
	"the mount's figure is $(awk -v a="$one" -v b="$bare" -v f="$rf" -v fb="$rbare" 'BEGIN { printf "%.2f", (a / b) / (f / fb) }')x the floor's ratio)"
# The mount against that floor directly: reports through VF/report and
# through reportfloor's file, interleaved (fresh VFs from 600 on).
((600 + alternate_vfs * alternate_runs <= 800)) ||
	fail "BENCH_ALTERNATE_RUNS=$alternate_runs, BENCH_ALTERNATE_VFS=$alternate_vfs: not enough fresh VFs"
read -r one_f rf_f < <(alternated ingest_vs_fuse_floor \
	'reports_of "$mnt" $((600 + alternate_vfs * i))' 'echo "$rfloor/report"' 2>"$T/pairs")
cat "$T/pairs"
figure ingest_vs_fuse_floor "$one_f" reports/s "$rf_f" reports/s ">=" 0.90
((16 + 64 * pairs_n <= 512)) || fail "BENCH_PAIRS=$pairs_n: not enough fresh VFs"
read -r many one < <(paired ingest_64_writers \
	'"$vfbench" ingest "$mnt" 64 "$ingest_64" $((16 + 64 * i))' \
	'"$vfbench" ingest "$mnt" 1 "$ingest_1" $((512 + i))' 2>"$T/pairs")
cat "$T/pairs"
figure ingest_64_writers "$many" reports/s "$one" reports/s ">=" 4
syscalls_per_report current "$DAEMON_PID" "$mnt" 700
stop_daemon

# -- FUSE requests per operation (vfhealthd -d traces every request) -----------------
# Counted from the trace once it has been quiet for 0.5 s: RELEASE and the
# toucher's requests arrive after the operation returns.  Commits from the
# metrics file (one fdatasync of the WAL each, synchronous=FULL).
DB=$shm/v1024.db
start_daemon --threshold 1000 --no-sentinel -d
requests() { grep -c 'opcode:' "$DAEMON_LOG" || true; }
quiet_requests() {
	local a b
	b=$(requests)
	while :; do
		sleep 0.5
		a=$(requests)
		((a == b)) && break
		b=$a
	done
	echo "$a"
}
commits() { awk '$1 == "vfhealth_store_commits_total" { print $2 }' <<<"$(vf_read "$mnt/metrics")"; }
count_requests() { # NAME COMMAND...
	local name=$1 r0 r1 lines0 lines1
	shift
	# warm, as a steady reader is: the first run looks the names up and
	# fills the page of a cached file; the READ that filled it dropped the
	# cached atime (the kernel does after every READ), which the second
	# run's fstat (cat's) refetches
	"$@" >/dev/null
	"$@" >/dev/null
	r0=$(quiet_requests)
	lines0=$(grep -c '^<[0-6]>' "$DAEMON_LOG" || true)
	"$@" >/dev/null
	r1=$(quiet_requests)
	lines1=$(grep -c '^<[0-6]>' "$DAEMON_LOG" || true)
	echo "requests_$name: $((r1 - r0)) FUSE requests, $((lines1 - lines0)) log lines above debug: $(sed -n "/opcode:/p" "$DAEMON_LOG" | tail -n $((r1 - r0)) | sed 's/.*opcode: \([A-Z_]*\).*/\1/' | sort | uniq -c | awk '{ printf "%s%s %s", sep, $1, $2; sep = ", " }')"
	((lines1 == lines0)) || grep '^<[0-6]>' "$DAEMON_LOG" | tail -n $((lines1 - lines0)) | sed 's/^/#   log: /'
}
count_requests read_vf_quarantined cat "$mnt/$vf/quarantined"
count_requests read_top_quarantined cat "$mnt/quarantined"
count_requests ls_vf_dir ls -l "$mnt/$vf"
report_n=0
one_report() {
	report_n=$((report_n + 1))
	vfio write "$mnt/$(vf_name 9)/report" "failed vm-count-$report_n 2026-01-01T00:00:00Z"
}
c0=$(commits)
count_requests report_failed one_report
c1=$(commits)
echo "commits_per_report: $(((c1 - c0) / 2)) (two reports: the warm one and the counted one)"
stop_daemon

# -- ingest against the baseline commit ----------------------------------------------
# Its vfhealthd and the current one side by side, each on a new database of
# its own on the disk, the same VFs made by mkdir on both (the baseline
# cannot open a newer schema), their reports interleaved (alternated).
baseline_err=$T/baseline.err
if base_daemon=$("$(dirname "${BASH_SOURCE[0]}")/baseline.sh" "${VFHEALTH_SOURCE_ROOT:?}" \
	"$build" "$baseline_commit" 2>"$baseline_err"); then
	bmnt=$T/baseline-mnt
	mkdir -p "$bmnt" "$disk/current" "$disk/baseline"
	DB=$disk/current/vfhealth.db
	start_daemon --threshold 1000 --no-sentinel
	background "$base_daemon" -f --db "$disk/baseline/vfhealth.db" --threshold 1000 \
		--no-sentinel --no-reconcile "$bmnt" >>"$T/baseline.log" 2>&1
	base_pid=$!
	EXTRA_MOUNTS+=("$bmnt")
	wait_for 30 "the baseline vfhealthd to mount" is_mounted "$bmnt"
	# the runs' VFs, then one for the system calls and one to warm
	base_vfs=$((alternate_vfs * alternate_runs))
	for ((k = 0; k <= base_vfs + 1; k++)); do
		mkdir "$mnt/$(vf_name $k)" "$bmnt/$(vf_name $k)"
	done
	warm_store "$mnt" $((base_vfs + 1))
	warm_store "$bmnt" $((base_vfs + 1))
	read -r cur base < <(alternated ingest_vs_baseline \
		'reports_of "$mnt" $((alternate_vfs * i))' \
		'reports_of "$bmnt" $((alternate_vfs * i))' 2>"$T/pairs")
	cat "$T/pairs"
	echo "#   (the baseline: vfhealthd of ${baseline_commit:0:12}, built by baseline.sh)"
	figure ingest_vs_baseline "$cur" reports/s "$base" reports/s ">=" 1.00
	# both on the same new database, the current one first (before: the
	# 1024-VF database's figure above)
	syscalls_per_report current_new_db "$DAEMON_PID" "$mnt" "$base_vfs"
	syscalls_per_report baseline_new_db "$base_pid" "$bmnt" "$base_vfs"
	kill -TERM "$base_pid"
	wait_for 30 "the baseline vfhealthd to stop" process_gone "$base_pid"
	stop_daemon
elif (($? == 2)); then
	echo "ingest_vs_baseline: skipped: $(cat "$baseline_err")"
else
	fail "cannot build the baseline ${baseline_commit:0:12}: $(cat "$baseline_err")"
fi
[[ ${BENCH_ONLY:-} != fs ]] || { echo "# $missed figure(s) missed their target (BENCH_ONLY=fs); load average now $(load)"; exit 0; }

# -- the sentinel: 1000 targets, then 100 of them never answering ------------------
adir=$shm/agents
mkdir -p "$adir"
mkfifo "$T/adversary.in"
exec {adv_in}<>"$T/adversary.in" # held open: the adversary stops when we exit
background "$adversary_bin" "$adir" ok:1000 silent:100 <"$T/adversary.in" >"$T/adversary.out" 2>&1
adv_pid=$!
wait_for 30 "the agents to listen" grep -qx ready "$T/adversary.out"
"$vfbench" populate "$shm/v1000.db" 1000 0 >/dev/null 2>&1
deadline_s=1 concurrency=64
DB=$shm/v1000.db
start_daemon --threshold 1000 --poll-interval 1 \
	--poll-timeout "$deadline_s" --concurrency "$concurrency" --no-reconcile
for ((i = 0; i < 1000; i++)); do
	v=$(vf_name $i)
	[[ $(vfio create "$mnt/$v/assignments/vm-$i") == ok ]] || fail "claim $v"
	[[ $(vfio write "$mnt/$v/assignments/vm-$i" \
		"agent=unix:$adir/ok-$i.sock"$'\n'"control=$adir/control.sock"$'\n') == ok ]] ||
		fail "claim attributes $v"
done
# (cat, not vf_read: metrics with 1000 claims is longer than vfio's 64 KiB)
metric() { awk -v m="$1" '$1 == m { print $2 }' "$mnt/metrics"; }
polls_past() { (($(metric vfhealth_sentinel_polls_total) >= $1)); }
# The median of three whole polls that started after the targets were set.
poll_time() {
	local p0 d=() k
	p0=$(metric vfhealth_sentinel_polls_total)
	for k in 2 3 4; do
		wait_for 120 "poll $((p0 + k))" polls_past $((p0 + k))
		d+=("$(metric vfhealth_sentinel_last_poll_duration_seconds)")
	done
	printf '%s\n' "${d[@]}" | sort -g | sed -n 2p
}
healthy=$(poll_time)
checks_ok=$(metric 'vfhealth_sentinel_checks_total{result="ok"}')
((checks_ok >= 1000)) || fail "the healthy targets did not answer ok ($checks_ok)"
for ((i = 0; i < 100; i++)); do
	v=$(vf_name $((i * 10)))
	[[ $(vfio write "$mnt/$v/assignments/vm-$((i * 10))" "agent=unix:$adir/silent-$i.sock") == ok ]] ||
		fail "repoint $v"
done
"$vfbench" latency "$mnt/$(vf_name 7)/quarantined" 8 >"$T/latency" &
latency_pid=$!
slow=$(poll_time)
wait "$latency_pid"
read -r lat_n lat_p50 lat_p99 lat_max <"$T/latency"
bound=$(awk -v h="$healthy" -v d="$deadline_s" -v c="$concurrency" 'BEGIN {
	slow = 100; n = int((slow + c - 1) / c); printf "%.3f", n * d + h }')
echo "#   (one poll of the 1000 answering targets: ${healthy} s)"
figure sentinel_poll_100_of_1000_hung "$slow" s "$bound" s "<=" 1.2
figure read_p99_during_scan "$(ms "$lat_p99")" ms 5 ms "<=" 1
echo "#   ($lat_n reads during the scan: p50 $(ms "$lat_p50") ms, max $(ms "$lat_max") ms)"
stop_daemon
kill "$adv_pid" 2>/dev/null || true

# -- footprint ---------------------------------------------------------------------
mkdir -p "$T/sys"
: >"$T/kmsg"
"$agent_bin" --listen "unix:$T/agent.sock" --kmsg "$T/kmsg" --sysfs-root "$T/sys" \
	--nvidia-smi /bin/false --probe-interval 0.2 --probe-window 1 >"$T/agent.log" 2>&1 &
agent_pid=$!
wait_for 10 "the agent to listen" test -S "$T/agent.sock"
sleep 2 # the measurement window starts after the probe window (1 s) has closed
switches() { cat /proc/"$agent_pid"/task/*/status | awk '/ctxt_switches/ { s += $2 } END { print s }'; }
s0=$(switches)
sleep "$idle_s" # the idle window being measured
s1=$(switches)
agent_rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$agent_pid/status")
kill "$agent_pid"
wait "$agent_pid" 2>/dev/null || true
wakeups=$(awk -v d=$((s1 - s0)) -v s="$idle_s" 'BEGIN { printf "%.1f", d * 60 / s }')
figure agent_rss_idle "$(awk -v k="$agent_rss" 'BEGIN { printf "%.2f", k / 1024 }')" MiB 1.5 MiB "<=" 1
echo "agent_wakeups_idle: $wakeups per minute (limit: 0 per minute) target == 0 [$([[ $wakeups == 0.0 ]] && echo ok || echo MISSED)]"
[[ $wakeups == 0.0 ]] || missed=$((missed + 1))

t0=$(date +%s%N)
"$vfbench" populate "$shm/big.db" 4096 100000 >/dev/null 2>&1
populate_s=$(awk -v ns=$(($(date +%s%N) - t0)) 'BEGIN { printf "%.1f", ns / 1e9 }')
cp -- "$shm/big.db" "$disk/big.db"
# Startup: from the daemon's start to its READY=1 (start_daemon measures
# it: the notify listener's own start is not the daemon's), the median of
# three starts on the same database, each stopped before the next.
DB=$disk/big.db
startups=()
for i in 1 2 3; do
	((i == 1)) || stop_daemon
	start_daemon --no-sentinel
	startups+=("$DAEMON_STARTUP_US")
done
startup_ns=$(($(printf '%s\n' "${startups[@]}" | sort -n | sed -n 2p) * 1000))
echo "#   (vfhealthd_startup: three starts, $(printf '%s ' "${startups[@]}")us; the median below)"
ls -l "$mnt" >/dev/null
vf_read "$mnt/quarantined" >/dev/null
cat "$mnt/$(vf_name 4095)/failures" >/dev/null
d_rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$DAEMON_PID/status")
figure vfhealthd_rss_4096_vfs_100k_failures "$(awk -v k="$d_rss" 'BEGIN { printf "%.2f", k / 1024 }')" MiB 16 MiB "<=" 1
figure vfhealthd_startup_4096_vfs_100k_failures "$(ms "$startup_ns")" ms 200 ms "<=" 1
echo "#   (populating 4096 VFs and 100000 failures through the store API took ${populate_s} s)"
stop_daemon
echo "# $missed figure(s) missed their target; load average now $(load)"
