#!/usr/bin/env bash
# drain-gpu.sh - take every VF of one parent GPU out of placement before
# maintenance (the recovery runbook's "drain" step), or put them back after.
#
#   drain-gpu.sh [--mount DIR] [--sysfs-root DIR] [--dry-run] PARENT
#   drain-gpu.sh [--mount DIR] [--sysfs-root DIR] [--dry-run] --clear PARENT
#
# PARENT is the physical function's PCI address (0000:41:00.0).  Its VFs are
# the registered VFs whose MOUNT/VF/parent reads PARENT (vfhealthd learnt it
# from sysfs at registration, or an operator wrote it), and the targets of
# the virtfn* links in SYSFS_ROOT/bus/pci/devices/PARENT/ when sysfs has it
# (those vfhealthd does not know are listed and skipped).
# Default: put an operator hold on each registered VF (echo 1 >
# MOUNT/VF/quarantined): no success report lifts it, and holds do not count
# against max_quarantined.
# --clear: lift each VF's hold and quarantine and drop its failures (echo 0),
# the runbook's last step once the parent's SR-IOV cycle is done.
# Every target is checked before the first write: a bad PARENT changes
# nothing.
# Exit: 0 all done; 1 a write failed (the rest were still tried); 2 usage.
set -euo pipefail

mount=/run/vfhealth
sysfs_root=/sys
dry_run=false
value=1
parent=
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "drain-gpu: $*" >&2; exit 2; }
while (($#)); do
	case $1 in
	--mount) mount=${2:?--mount needs a directory}; shift 2 ;;
	--sysfs-root) sysfs_root=${2:?--sysfs-root needs a directory}; shift 2 ;;
	--dry-run) dry_run=true; shift ;;
	--clear) value=0; shift ;;
	-h|--help) usage; exit 0 ;;
	-*) die "unknown option: $1" ;;
	*) [[ -z $parent ]] || die "one PARENT only"; parent=$1; shift ;;
	esac
done
[[ -n $parent ]] || { usage >&2; exit 2; }

pci_re='^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$'
[[ $parent =~ $pci_re ]] || die "PARENT must be a PCI address like 0000:41:00.0, not '$parent'"
dev=$sysfs_root/bus/pci/devices/$parent
[[ -d $mount && -e $mount/quarantined ]] || die "$mount is not a vfhealth mount"

vfs=()
# What vfhealthd knows: every registered VF's parent.
for dir in "$mount"/*/; do
	vf=$(basename -- "$dir")
	[[ $vf =~ $pci_re && -e $dir/parent ]] || continue
	[[ $(cat -- "$dir/parent" 2>/dev/null) == "$parent" ]] && vfs+=("$vf")
done
# What sysfs knows (also the VFs vfhealthd has not registered).
for link in "$dev"/virtfn*; do
	[[ -L $link ]] || continue
	vf=$(basename -- "$(readlink -- "$link")")
	[[ $vf =~ $pci_re ]] || die "$link points at '$vf', not a PCI address"
	vfs+=("$vf")
done
((${#vfs[@]})) || die "$parent has no VFs: no registered VF names it in its parent file, and sysfs lists none under $sysfs_root (SR-IOV disabled, or not a physical function)"
mapfile -t vfs < <(printf '%s\n' "${vfs[@]}" | sort -u)

action=$([[ $value == 1 ]] && echo quarantine || echo clear)
rc=0
for vf in "${vfs[@]}"; do
	if [[ ! -d $mount/$vf ]]; then
		echo "skip   $vf (not registered with vfhealthd)"
		continue
	fi
	if $dry_run; then
		echo "would $action $vf"
		continue
	fi
	if err=$( { printf '%s\n' "$value" > "$mount/$vf/quarantined"; } 2>&1 ); then
		echo "$action $vf"
	else
		echo "FAILED $action $vf: ${err##*: }" >&2
		rc=1
	fi
done
exit "$rc"
