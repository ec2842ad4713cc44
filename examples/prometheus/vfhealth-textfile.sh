#!/usr/bin/env bash
# vfhealth-textfile.sh - publish /run/vfhealth/metrics through node_exporter's
# textfile collector: copy it into the collector's directory atomically
# (write a temporary file, check it, rename), so node_exporter never reads
# half a file and every host's vfhealth series arrive with the scrape
# Prometheus already does.  Run by vfhealth-textfile.timer every 15 s.
#
#   vfhealth-textfile.sh [--mount DIR] [--dir TEXTFILE_DIR]
#
# TEXTFILE_DIR is node_exporter's --collector.textfile.directory (Debian's
# prometheus-node-exporter: /var/lib/prometheus/node-exporter).  When the
# metrics cannot be read (vfhealthd down), the old copy is removed rather than
# left to look current: the VfhealthMetricsStale alert or absent series tell.
set -euo pipefail

mount=/run/vfhealth
dir=/var/lib/prometheus/node-exporter
while (($#)); do
	case $1 in
	--mount) mount=${2:?}; shift 2 ;;
	--dir) dir=${2:?}; shift 2 ;;
	-h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "vfhealth-textfile: unknown argument: $1" >&2; exit 2 ;;
	esac
done

out=$dir/vfhealth.prom
# The collector reads only *.prom: the temporary name is ignored until renamed.
tmp=$(mktemp -- "$dir/.vfhealth.prom.XXXXXX")
trap 'rm -f -- "$tmp"' EXIT
if ! cat -- "$mount/metrics" > "$tmp" || ! grep -q '^vfhealth_' "$tmp"; then
	echo "vfhealth-textfile: cannot read $mount/metrics; removing $out" >&2
	rm -f -- "$out"
	exit 1
fi
chmod 0644 -- "$tmp"
mv -f -- "$tmp" "$out"
