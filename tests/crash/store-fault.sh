#!/usr/bin/env bash
# store-fault.sh full|ioerror - the store fails closed under a running
# vfhealthd and recovers with `echo repair > status`, losing nothing.
#
#   full     the database directory is a tiny tmpfs, filled up to the last byte
#   ioerror  every write and sync under the database directory returns EIO
#            (faultio.so preloaded into the daemon; a read-only remount is
#            refused by Linux while the database is open for writing)
#
# While the fault lasts: the write that hit it and every later mutation fail
# with EIO and change nothing; `status` says why; `metrics` shows
# vfhealth_store_unavailable 1; what the contract serves from committed state
# is served (VF list, tallies, failures, claims, resources with
# allocatable_slots 0), placement-facing reads (quarantined) fail with EIO;
# a success report that changes nothing still succeeds; repair fails.  Once
# the fault is gone: repair succeeds, every acknowledged write is there, the
# rejected ones are not, new writes work, and all of it survives a restart.
set -euo pipefail
# shellcheck source=tests/crash/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mode=${1:?usage: store-fault.sh full|ioerror}
require_fuse
mnt=$MNT
dbdir=$T/dbfs
DB=$dbdir/vfhealth.db
trigger=$T/fault-on

case $mode in
full)
	mount_tmpfs "$dbdir" 2m
	reason_re='full'
	;;
ioerror)
	faultio=${FAULTIO:?FAULTIO must name libfaultio.so (set by meson)}
	mkdir -p "$dbdir"
	# The shim comes before the sanitizer runtime in the library list: tell
	# ASan that is intended.
	DAEMON_ENV=(LD_PRELOAD="$faultio" VFHEALTH_FAULT_DIR="$dbdir"
		    VFHEALTH_FAULT_TRIGGER="$trigger"
		    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0")
	reason_re='I/O'
	;;
*) fail "unknown mode $mode" ;;
esac

A=0000:41:00.1 B=0000:41:00.2 C=0000:41:00.3 D=0000:41:00.4 E=0000:41:00.5

# A threshold no report here reaches; B is quarantined by the operator.
start_daemon --threshold 1000
for vf in $A $B $C $D; do expect ok mkdir "$mnt/$vf"; done
expect "ok recorded" report "$mnt/$A/report" "failed a-1 - first"
expect "ok recorded" report "$mnt/$B/report" "failed b-1 - one"
expect ok write "$mnt/$B/quarantined" 1
expect ok create "$mnt/$C/assignments/vm-c"
acked=(a-1)

# Everything a reader can see, to compare after the fault.
committed_view() {
	vf_read "$mnt/threshold"
	vf_read "$mnt/max_quarantined"
	ls -1 "$mnt" | sort
	for vf in $A $B $C $D; do
		echo "== $vf"
		vf_read "$mnt/$vf/tally"
		vf_read "$mnt/$vf/failures" | cut -d' ' -f2-
		ls -1 "$mnt/$vf/assignments"
	done
}

# -- the fault ---------------------------------------------------------------
case $mode in
full)
	# Fill the filesystem to the last block; then report until a commit
	# no longer fits (the WAL may hold a few more first).
	dd if=/dev/zero of="$dbdir/filler" bs=64k 2>/dev/null || true
	dd if=/dev/zero of="$dbdir/filler2" bs=512 2>/dev/null || true
	msg=$(printf 'x%.0s' {1..900})
	hit=
	for ((i = 1; i <= 3000; i++)); do
		got=$(vfio report "$mnt/$A/report" "failed full-$i - $msg")
		case $got in
		"ok recorded"*) acked+=("full-$i") ;;
		EIO) hit=full-$i; break ;;
		*) fail "report full-$i on a full disk: got '$got', want success or EIO" ;;
		esac
	done
	[[ -n $hit ]] || fail "3000 reports fit on a full 2 MiB filesystem"
	;;
ioerror)
	touch "$trigger"
	hit=io-1
	expect EIO report "$mnt/$A/report" "failed io-1 - during the fault"
	;;
esac
echo "$mode: the fault surfaced as EIO at report $hit (${#acked[@]} acknowledged before it)"
before=$(committed_view)

status=$(vf_read "$mnt/status")
[[ $status == "unavailable: "* && $status =~ $reason_re ]] ||
	fail "$mode: status says '$status', want 'unavailable: ...$reason_re...'"
# (a here-string, not a pipe: grep -q exits early, and pipefail would
# count the writer's SIGPIPE as a failure)
grep -qx 'vfhealth_store_unavailable 1' <<<"$(vf_read "$mnt/metrics")" ||
	fail "$mode: metrics do not show vfhealth_store_unavailable 1 (status: $(vf_read "$mnt/status")): $(vf_read "$mnt/metrics" | grep -E '^vfhealth_(store|allocatable)')"
resources=$(vf_read "$mnt/resources")
grep -qx 'allocatable_slots 0' <<<"$resources" || fail "$mode: resources: $resources"
grep -q '^placement_disabled_reason ' <<<"$resources" || fail "$mode: resources give no reason"

# Every mutation fails with EIO and changes nothing.
expect EIO report "$mnt/$A/report" "failed late-1 - during the fault"
expect EIO write "$mnt/threshold" 5
expect EIO write "$mnt/max_quarantined" 3
expect EIO mkdir "$mnt/$E"
expect EIO rmdir "$mnt/$D"
expect EIO write "$mnt/$A/quarantined" 1
expect EIO write "$mnt/$B/quarantined" 0
expect EIO report "$mnt/$B/report" "ok b-1 -"
expect EIO create "$mnt/$D/assignments/vm-d"
expect EIO unlink "$mnt/$C/assignments/vm-c"
# A success report that changes nothing takes no write: still served.
expect "ok cleared=0 rescinded=0" report "$mnt/$D/report" "ok vm-d -"
# Placement fails closed: the quarantine bits are not served.
expect EIO read "$mnt/quarantined"
expect EIO read "$mnt/$B/quarantined"
# Repair cannot succeed while the fault lasts.
expect EIO write "$mnt/status" repair
[[ $(vf_read "$mnt/status") == "unavailable: "* ]] || fail "$mode: a failed repair cleared the status"
[[ $(committed_view) == "$before" ]] || fail "$mode: a rejected write changed what readers see"

# -- the fault goes away -----------------------------------------------------
case $mode in
full) rm -f "$dbdir/filler" "$dbdir/filler2" ;;
ioerror) rm -f "$trigger" ;;
esac
expect ok write "$mnt/status" repair
[[ $(vf_read "$mnt/status") == ok ]] || fail "$mode: status after repair: $(vf_read "$mnt/status")"
grep -qx 'vfhealth_store_unavailable 0' <<<"$(vf_read "$mnt/metrics")" ||
	fail "$mode: metrics still show the store unavailable: $(vf_read "$mnt/metrics" | grep -E 'unavailable|commit')"

check_nothing_lost() {
	local when=$1 failures id
	failures=$(vf_read "$mnt/$A/failures" | cut -d' ' -f2)
	for id in "${acked[@]}"; do
		grep -qx -- "$id" <<<"$failures" || fail "$mode ($when): acknowledged report $id lost"
	done
	for id in "$hit" late-1; do
		! grep -qx -- "$id" <<<"$failures" || fail "$mode ($when): rejected report $id was stored"
	done
	[[ $(vf_read "$mnt/$A/tally") == "${#acked[@]}" ]] ||
		fail "$mode ($when): tally $(vf_read "$mnt/$A/tally"), want ${#acked[@]}"
	[[ $(vf_read "$mnt/quarantined") == "$B" ]] || fail "$mode ($when): quarantined: $(vf_read "$mnt/quarantined")"
	[[ $(ls -1 "$mnt/$C/assignments") == vm-c ]] || fail "$mode ($when): the claim on $C is gone"
	[[ ! -e $mnt/$E ]] || fail "$mode ($when): the rejected mkdir of $E took effect"
	[[ $(vf_read "$mnt/threshold") == 1000 ]] || fail "$mode ($when): threshold changed"
	[[ $(vf_read "$mnt/$B/tally") == 1 ]] || fail "$mode ($when): $B lost its failure"
	pass "$mode ($when): nothing acknowledged lost, nothing rejected stored"
}
check_nothing_lost "after repair"
expect "ok recorded" report "$mnt/$A/report" "failed after-1 - after the repair"
acked+=(after-1)

stop_daemon
DAEMON_ENV=()
start_daemon --threshold 1000
check_nothing_lost "after a restart"
[[ $(vf_read "$mnt/status") == ok ]] || fail "$mode: status after restart"
stop_daemon
echo "$mode: store failed closed with '$status' and recovered with nothing lost"
