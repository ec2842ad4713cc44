#!/usr/bin/env bash
# demo.sh - vfhealth on a machine without a GPU: vfhealthd mounted with its
# own SQLite file, four registered VFs, simulated guests (real vfhealth-agent
# processes fed kernel records through FIFOs, with a fake nvidia-smi, each
# behind a test-vmm hybrid-vsock socket), and the sentinel quarantining the
# wedged VF after two failed assignments while you watch; then a second GPU,
# of a fake sysfs, whose two wedged VFs auto_recover drains and cycles.
#
#   examples/demo.sh --build BUILD_DIR [--once] [--mount DIR] [--workdir DIR]
#                    [--poll-interval S]
#
# It is a demo on every host, one with an NVIDIA GPU too: it never uses
# /run/vfhealth or /var/lib/vfhealth (it refuses --mount or --workdir there).
#   --once       run the scenario, check the quarantine, clean up and exit
#                (0 when the wedged VF, and only it, was quarantined)
#   --mount DIR  where to mount (default WORKDIR/mnt)
#   --workdir    for the database, sockets, FIFOs and logs (default
#                BUILD_DIR/demo, emptied when the next demo starts)
# Without --once it then prints "What to try next" (commands that work as
# printed against the demo's mount) and runs until stopped.
# Ctrl-C (or SIGTERM) unmounts and stops every process the demo started; the
# work directory, logs included, stays until the next demo.
# The programs come from BUILD_DIR unless VFHEALTHD, VFHEALTH_AGENT and
# TEST_VMM (environment) name them.  `./dev.sh run` runs this.
set -euo pipefail

build=
once=false
mount=
workdir=
poll_interval=0.5
usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "demo: $*" >&2; exit 2; }
while (($#)); do
	case $1 in
	--build) build=${2:?--build needs a directory}; shift 2 ;;
	--once|--no-wait) once=true; shift ;;
	--mount) mount=${2:?--mount needs a directory}; shift 2 ;;
	--workdir) workdir=${2:?--workdir needs a directory}; shift 2 ;;
	--poll-interval) poll_interval=${2:?}; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument: $1" ;;
	esac
done
if [[ -z $build && -z ${VFHEALTHD:-} && -z ${VFHEALTH_AGENT:-} && -z ${TEST_VMM:-} ]]; then
	usage >&2
	die "--build BUILD_DIR is required"
fi
vfhealthd=${VFHEALTHD:-$build/daemon/vfhealthd}
agent=${VFHEALTH_AGENT:-$build/guest-agent/vfhealth-agent}
test_vmm=${TEST_VMM:-$build/tests/sentinel/test-vmm}
examples=$(cd "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)

# A host with an NVIDIA GPU (PCI vendor 0x10de, or an nvidia-smi that lists
# one) gets the demo too: the service is installed, not run from here.
have_nvidia_gpu() {
	local v
	for v in /sys/bus/pci/devices/*/vendor; do
		[[ -r $v && $(<"$v") == 0x10de ]] && return 0
	done
	command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '
}
if have_nvidia_gpu; then
	echo "demo: this host has an NVIDIA GPU; the demo still runs on a mount and database of its own" \
		"(for the service: README.md, \"Building by hand\", and systemctl enable --now vfhealthd)" >&2
fi

for b in "$vfhealthd" "$agent" "$test_vmm"; do
	[[ -x $b ]] || die "$b is not built (meson compile -C ${build:-BUILD_DIR})"
done
[[ -c /dev/fuse && -r /dev/fuse && -w /dev/fuse ]] || die "this machine cannot mount FUSE (/dev/fuse)"
command -v fusermount3 >/dev/null || die "fusermount3 is missing (Debian: fuse3)"
# vfhealthd mounts with allow_other, which FUSE grants a non-root user only
# with user_allow_other in /etc/fuse.conf.
if [[ $(id -u) != 0 ]] && ! grep -qs '^[[:space:]]*user_allow_other' /etc/fuse.conf; then
	die "run as root (vfhealthd mounts with allow_other), or enable user_allow_other in /etc/fuse.conf"
fi

# ---- work directory, cleanup -------------------------------------------------

# under_production PATH: PATH is, or is under, the service's mountpoint or
# state directory.
under_production() {
	local p
	p=$(realpath -m -- "$1")
	[[ $p == /run/vfhealth || $p == /run/vfhealth/* || $p == /var/lib/vfhealth || $p == /var/lib/vfhealth/* ]]
}
# mounts_under DIR: the mounts at or below DIR.
mounts_under() { awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo; }

# The paths are checked before anything is created or emptied.
own_workdir=false
if [[ -z $workdir ]]; then
	[[ -n $build ]] || die "--workdir DIR is required without --build"
	workdir=$build/demo
	own_workdir=true
fi
workdir=$(realpath -m -- "$workdir")
under_production "$workdir" && die "the work directory $workdir is the service's; use another --workdir"
# A demo never occupies the production path: its mount lives in the work
# directory unless --mount names another.
[[ -n $mount ]] || mount=$workdir/mnt
mount=$(realpath -m -- "$mount")
under_production "$mount" && die "$mount is the service's mountpoint; the demo mounts elsewhere (--mount DIR)"
if $own_workdir; then
	# The last demo's directory, kept for its logs, is emptied now; one demo
	# per build directory at a time (the lock is held by every process the
	# demo starts, so a leftover daemon keeps it too).
	exec {lock_fd}>>"$workdir.lock"
	flock -n "$lock_fd" ||
		die "another demo (or a process it left) runs in $workdir: stop it first (fuser -v $workdir.lock)"
	[[ -z $(mounts_under "$workdir") ]] ||
		die "something is still mounted under $workdir: $(mounts_under "$workdir" | tr '\n' ' ')"
	rm -rf --one-file-system -- "$workdir"
fi
mkdir -p -- "$workdir"

children=()
declare -A vmm_pid=()
daemon_pid=
cleaned=false
cleanup() {
	$cleaned && return
	cleaned=true
	local pid deadline
	# Guests and VMMs first, then the daemon (SIGTERM: it unmounts).
	for pid in "${children[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${children[@]}"; do wait "$pid" 2>/dev/null || true; done
	if [[ -n $daemon_pid ]]; then
		kill -TERM "$daemon_pid" 2>/dev/null || true
		deadline=$((SECONDS + 10))
		while kill -0 "$daemon_pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.05; done
		if kill -0 "$daemon_pid" 2>/dev/null; then
			# A daemon that hangs on its own mount cannot even die: a forced
			# unmount aborts the FUSE connection and frees it.
			kill -KILL "$daemon_pid" 2>/dev/null || true
			umount -f "$mount" 2>/dev/null || true
		fi
		wait "$daemon_pid" 2>/dev/null || true
	fi
	# mountpoint(1) would stat a dead mount; read the mount table instead.
	if awk -v m="$mount" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo; then
		fusermount3 -uz "$mount" 2>/dev/null || umount -l "$mount" 2>/dev/null || true
	fi
	echo "demo: the work directory $workdir, logs included, stays until the next demo" >&2
}
trap cleanup EXIT
trap 'echo; echo "demo: stopping"; exit 130' INT
trap 'exit 143' TERM

daemon_died() {
	echo "demo: vfhealthd died; the end of $workdir/vfhealthd.log:" >&2
	tail -n 40 "$workdir/vfhealthd.log" >&2
	exit 1
}

# wait_for DESCRIPTION SECONDS COMMAND...: until COMMAND succeeds.
wait_for() {
	local what=$1 deadline=$((SECONDS + $2))
	shift 2
	until "$@"; do
		[[ -z $daemon_pid ]] || kill -0 "$daemon_pid" 2>/dev/null || daemon_died
		((SECONDS < deadline)) || { echo "demo: timed out waiting for $what" >&2; exit 1; }
		sleep 0.05
	done
}

bold=; plain=
if [[ -t 1 ]]; then bold=$'\e[1m'; plain=$'\e[0m'; fi
step() { printf '\n%s==> %s%s\n' "$bold" "$*" "$plain"; }
# show CMD...: print the command as an operator would type it, then run it.
show() {
	local out
	printf '%s$ %s%s\n' "$bold" "$*" "$plain"
	out=$(bash -c "$*" 2>&1) || true
	printf '%s\n' "${out:-(empty)}" | sed 's/^/  /'
}

# ---- vfhealthd -------------------------------------------------------------------

# A fake sysfs with two GPUs and their VFs (virtfn and physfn links), which
# vfhealthd registers as it would a host's, and a stand-in for
# examples/recovery/sriov-cycle.sh that cycles one there: the demo's
# recovery program (no GPU, no sriov-manage).
# GPU 0000:41:00.0: three guests run on .4, .5 and .7 in the end, .6 is
# wedged, 41:01.1 loses its VMM during init (suspect), and 41:01.0 stays
# free, for "What to try next" to claim.
sys=$workdir/sys
pf1=0000:41:00.0
vfs=(0000:41:00.4 0000:41:00.5 0000:41:00.6 0000:41:00.7 0000:41:01.0 0000:41:01.1)
wedged=0000:41:00.6
spare=0000:41:01.0
early=0000:41:01.1
pf2=0000:42:00.0
gpu2_vfs=(0000:42:00.4 0000:42:00.5)
# fake_gpu PF VF...: an NVIDIA GPU with SR-IOV and its VFs
fake_gpu() {
	local pf=$1 i=0 vf
	shift
	mkdir -p -- "$sys/bus/pci/devices/$pf"
	echo 0x10de >"$sys/bus/pci/devices/$pf/vendor" # NVIDIA, with SR-IOV: vfhealthd registers and cycles no other
	echo 16 >"$sys/bus/pci/devices/$pf/sriov_totalvfs"
	for vf in "$@"; do
		mkdir -p -- "$sys/bus/pci/devices/$vf"
		ln -s "../$pf" "$sys/bus/pci/devices/$vf/physfn"
		ln -s "../$vf" "$sys/bus/pci/devices/$pf/virtfn$i"
		i=$((i + 1))
	done
}
fake_gpu "$pf1" "${vfs[@]}"
fake_gpu "$pf2" "${gpu2_vfs[@]}"
cat >"$workdir/sriov-cycle-demo.sh" <<'EOF_CYCLE'
#!/bin/bash
# The demo's recovery program: what sriov-cycle.sh does, on a fake sysfs.
set -euo pipefail
dev=$VFHEALTH_SYSFS_ROOT/bus/pci/devices/$1
links=()
for l in "$dev"/virtfn*; do links+=("${l##*/} $(readlink "$l")"); done
echo "sriov-manage -d $1: its $VFHEALTH_NUMVFS VFs go (demo: their links)"
rm -f -- "$dev"/virtfn*
echo "sriov-manage -e $1: they come back"
for e in "${links[@]}"; do ln -s "${e#* }" "$dev/${e%% *}"; done
EOF_CYCLE
chmod 0755 "$workdir/sriov-cycle-demo.sh"

step "Mounting vfhealthd on $mount (database $workdir/vfhealth.db)"
mkdir -p -- "$mount"
# The guests' sockets live in the work directory: the claims may name it.
"$vfhealthd" -f --db "$workdir/vfhealth.db" --threshold 2 --socket-dir "$workdir" \
	--poll-interval "$poll_interval" --poll-timeout 2 --reconcile-interval 1 \
	--sysfs-root "$sys" --recover-program "$workdir/sriov-cycle-demo.sh" --recover-timeout 30 \
	"$mount" >>"$workdir/vfhealthd.log" 2>&1 &
daemon_pid=$!
mounted() { [[ -e $mount/status ]]; }
wait_for "vfhealthd to mount" 20 mounted
echo "  vfhealthd runs as pid $daemon_pid; its log is $workdir/vfhealthd.log"

step "vfhealthd registers the VFs sysfs shows: ${#vfs[@]} of GPU $pf1, ${#gpu2_vfs[@]} of GPU $pf2"
all_registered() {
	local vf
	for vf in "${vfs[@]}" "${gpu2_vfs[@]}"; do [[ -d $mount/$vf ]] || return 1; done
}
wait_for "vfhealthd to register the VFs" 20 all_registered
show "grep 'registered from sysfs' $workdir/vfhealthd.log"
show "ls $mount"
show "cat $mount/resources"

# ---- simulated guests ---------------------------------------------------------------

# A fake sysfs with one NVIDIA function, as a guest with a vGPU sees it.
mkdir -p "$workdir/sysfs/bus/pci/devices/0000:00:05.0"
echo 0x10de > "$workdir/sysfs/bus/pci/devices/0000:00:05.0/vendor"

# start_guest NAME healthy|wedged: vfhealth-agent reading kernel records from
# the FIFO NAME.kmsg, with an nvidia-smi that works only on a healthy GPU,
# behind a test-vmm (hybrid vsock NAME.hv, control socket NAME.ctl).
start_guest() {
	local name=$1 kind=$2 g=$workdir/$1
	mkfifo "$g.kmsg"
	# nvidia-smi -L works once NAME.gpu-ok exists: from the start on a
	# healthy VF, never on a wedged one (unless you create the file).
	if [[ $kind == healthy ]]; then : > "$g.gpu-ok"; fi
	cat > "$g.nvidia-smi" <<-EOF
	#!/bin/sh
	[ -e "$g.gpu-ok" ] && { echo "GPU 0: NVIDIA A16-4Q (UUID: GPU-$name)"; exit 0; }
	echo "No devices were found" >&2
	exit 6
	EOF
	chmod +x "$g.nvidia-smi"
	"$agent" --listen "unix:$g.sock" --kmsg "$g.kmsg" --sysfs-root "$workdir/sysfs" \
		--nvidia-smi "$g.nvidia-smi" --probe-interval 0.2 --probe-window 3600 >>"$g.log" 2>&1 &
	children+=("$!")
	wait_for "$name's agent" 20 test -S "$g.sock"
	"$test_vmm" --hvsock "$g.hv" --control "$g.ctl" --agent "unix:$g.sock" >>"$g.vmm.log" 2>&1 &
	children+=("$!")
	vmm_pid[$name]=$!
	wait_for "$name's VMM" 20 test -S "$g.ctl" -a -S "$g.hv"
	if [[ $kind == wedged ]]; then
		# What the guest kernel logs when the VF is wedged (kernel facility,
		# priority err), as /dev/kmsg would hand it to the agent.
		printf '3,%d,%d,-;NVRM: GPU 0000:00:05.0: RmInitAdapter failed! (0x22:0x65:884)\n' \
			"$RANDOM" "$((SECONDS * 1000000))" > "$g.kmsg"
	fi
}

# assign NAME VF: the VMM manager claims VF for NAME (create, then one write),
# naming its VMM's pid: a VMM gone is seen at once, not after the startup
# grace a control socket alone gets.
assign() {
	local name=$1 vf=$2 g=$workdir/$1
	MOUNT=$mount "$examples/vmm/vfhealth-claim.sh" claim "$vf" "$name" \
		--agent "hvsock:$g.hv:2222" --control "$g.ctl" --pid "${vmm_pid[$name]}" >/dev/null
	echo "  $name started on $vf"
}

# stop_guest NAME VF: the VM is gone: stop its VMM and release the claim.
stop_guest() {
	local name=$1 vf=$2
	kill -TERM "${vmm_pid[$name]}" 2>/dev/null || true
	MOUNT=$mount "$examples/vmm/vfhealth-claim.sh" release "$vf" "$name"
	echo "  $name stopped, $vf released"
}

tally_is() { [[ $(cat "$mount/$1/tally") == "$2" ]]; }
quarantined_is() { [[ $(cat "$mount/$1/quarantined") == "$2" ]]; }
checks_ok() { awk '$1 == "vfhealth_sentinel_checks_total{result=\"ok\"}" { exit !($2 >= 2) }' "$mount/metrics"; }

step "Starting three guests: vm-a and vm-b are healthy, vm-c got the wedged VF $wedged"
start_guest vm-a healthy
start_guest vm-b healthy
start_guest vm-c wedged
assign vm-a 0000:41:00.4
assign vm-b 0000:41:00.5
assign vm-c "$wedged"
echo "  the sentinel polls every ${poll_interval}s; vm-c's driver logged: RmInitAdapter failed!"
wait_for "the sentinel to record vm-c's failure" 30 tally_is "$wedged" 1
wait_for "the sentinel to see the healthy guests" 30 checks_ok
show "cat $mount/$wedged/tally"
show "cat $mount/$wedged/failures"
show "cat $mount/quarantined"
echo "  one failed assignment is not enough (threshold $(cat "$mount/threshold")): it could be the guest."

step "vm-c is stopped; the scheduler puts a new guest, vm-d, on the same VF"
stop_guest vm-c "$wedged"
start_guest vm-d wedged
assign vm-d "$wedged"
wait_for "the sentinel to quarantine $wedged" 30 quarantined_is "$wedged" 1
show "cat $mount/$wedged/tally"
show "cat $mount/quarantined"
show "cat $mount/$wedged/failures"
show "cat $mount/resources"

step "Placement now refuses the wedged VF"
start_guest vm-e healthy
printf '%s$ %s%s\n' "$bold" "MOUNT=$mount vfhealth-claim.sh claim $wedged vm-e ..." "$plain"
if MOUNT=$mount "$examples/vmm/vfhealth-claim.sh" claim "$wedged" vm-e \
	--agent "hvsock:$workdir/vm-e.hv:2222" --control "$workdir/vm-e.ctl" >/dev/null 2>"$workdir/refused"; then
	echo "demo: FAILED: the quarantined VF $wedged could still be claimed" >&2
	exit 1
fi
sed 's/^/  /' "$workdir/refused"
assign vm-e 0000:41:00.7

step "vm-f's VMM is killed (SIGKILL) just after its claim, while the VF initializes"
start_guest vm-f healthy
assign vm-f "$early"
kill -KILL "${vmm_pid[vm-f]}"
wait "${vmm_pid[vm-f]}" 2>/dev/null || true
echo "  vm-f's VMM is gone; no guest has reported anything about $early"
suspect_is() { [[ $(cat "$mount/$1/state") == suspect ]]; }
wait_for "reconcile to release vm-f's claim" 20 suspect_is "$early"
show "cat $mount/$early/state"
show "grep ' suspect ' $mount/$early/history"
show "cat $mount/allocatable"
if [[ $(tail -n 1 "$mount/allocatable") != "$early" ]]; then
	echo "demo: FAILED: the suspect VF $early is not last in allocatable" >&2
	exit 1
fi
echo "  $early moved to the back of allocatable before any guest failed on it (the next guest's OK clears it)"

step "GPU $pf2: two VFs wedged; auto_recover drains the GPU and cycles its SR-IOV"
show "echo 2 > $mount/auto_recover"
# Two failed assignments on each, as the sentinel writes them for a guest
# that logged RmInitAdapter failed.
for vf in "${gpu2_vfs[@]}"; do
	for inst in vm-x vm-y; do
		echo "failed $inst-${vf//[:.]/-} - NVRM: RmInitAdapter failed! (demo)" >"$mount/$vf/report"
	done
done
recovered() { grep -q ' recovered ' "$mount/gpus/$pf2/history"; }
wait_for "the automatic recovery of $pf2" 30 recovered
show "cat $mount/gpus/$pf2/history"
show "cat $mount/gpus/$pf2/state"
show "grep -E 'GPU $pf2: (auto_recover|recovery|recovered|.*sriov-cycle-demo)' $workdir/vfhealthd.log"
for vf in "${gpu2_vfs[@]}"; do
	if [[ $(cat "$mount/$vf/quarantined") != 0 || $(cat "$mount/gpus/$pf2/state") != serving ]]; then
		echo "demo: FAILED: $vf of the recovered GPU $pf2 is not back in service" >&2
		exit 1
	fi
done
echo "  $pf2 was drained, cycled and is serving again: its VFs are back in allocatable"

step "Metrics (Prometheus text, for node_exporter's textfile collector)"
show "grep -E '^vfhealth_(vfs|quarantined_vfs|store_unavailable|breaker_engaged|sentinel_init_failures_total|sentinel_quarantines_total|sentinel_checks_total|vf_suspect|gpu_recoveries_total)' $mount/metrics"

# The check --once (and the test) relies on: exactly the wedged VF.
kill -0 "$daemon_pid" 2>/dev/null || daemon_died
if [[ $(cat "$mount/quarantined") != "$wedged" ]]; then
	echo "demo: FAILED: quarantined is '$(cat "$mount/quarantined")', want $wedged" >&2
	exit 1
fi
echo
echo "demo: $wedged quarantined after two failed assignments (vm-c, vm-d); the healthy VFs stay in service; GPU $pf2 drained and recovered"

if $once; then
	exit 0
fi

# "What to try next", one list: what is printed is exactly this, and
# tests/ops/demo-next-steps.sh runs every line of it, in order, against the
# demo's final state (vm-d on the wedged VF, vm-a, vm-b and vm-e on .4, .5
# and .7, $spare free, $early free and suspect).  Lines starting with # are comments; a command that
# runs until interrupted says "# until Ctrl-C".
next_steps=(
	"ls $mount $mount/$wedged"
	"cat $mount/quarantined $mount/resources $mount/status"
	"$examples/placement/watch-quarantined.sh --mount $mount     # inotify watcher, until Ctrl-C"
	"$examples/placement/watch_quarantined.py --mount $mount     # poll(2) watcher, until Ctrl-C"
	""
	"# vm-d's GPU comes up after all: the success of the assignment that"
	"# triggered the quarantine lifts it (and clears the older failure)"
	"touch $workdir/vm-d.gpu-ok"
	"until [ -z \"\$(cat $mount/quarantined)\" ]; do sleep 0.2; done; cat $mount/$wedged/tally"
	""
	"# an operator quarantine (vm-b keeps running there), then the runbook's"
	"# last step, which puts a recovered VF back"
	"echo 1 > $mount/0000:41:00.5/quarantined; cat $mount/quarantined"
	"echo 0 > $mount/0000:41:00.5/quarantined"
	"# the claim a VMM manager makes on the free VF, and its release"
	"MOUNT=$mount $examples/vmm/vfhealth-claim.sh claim $spare my-vm"
	"MOUNT=$mount $examples/vmm/vfhealth-claim.sh release $spare my-vm"
	""
	"grep ^vfhealth_ $mount/metrics"
)
printf '\n%sWhat to try next%s (in another terminal, as root):\n\n' "$bold" "$plain"
for line in "${next_steps[@]}"; do
	if [[ -n $line ]]; then printf '  %s\n' "$line"; else echo; fi
done
printf '\nLogs: %s/*.log.  Press Ctrl-C to stop: it unmounts and stops every process (the logs stay).\n' "$workdir"
# Wait for Ctrl-C (the INT trap exits) or for vfhealthd to end on its own.
wait "$daemon_pid" || true
echo "demo: vfhealthd exited" >&2
