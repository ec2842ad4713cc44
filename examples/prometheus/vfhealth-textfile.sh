#!/usr/bin/env bash
# vfhealth-textfile.sh - publish /run/vfhealth/metrics through node_exporter's
# textfile collector as TEXTFILE_DIR/vfhealth.prom, so every host's vfhealth
# series arrive with the scrape Prometheus already does.  Run by
# vfhealth-textfile.timer every 15 s.
#
#   vfhealth-textfile.sh [--mount DIR] [--dir TEXTFILE_DIR]
#
# TEXTFILE_DIR is node_exporter's --collector.textfile.directory (Debian's
# prometheus-node-exporter: /var/lib/prometheus/node-exporter).
#
# The file is never deleted: alerts must not go blind when vfhealthd does.
# Besides vfhealthd's series it carries the publisher's own:
#   vfhealth_textfile_scrape_ok                       1 if this run read the mount, else 0
#   vfhealth_textfile_last_run_timestamp_seconds      when the publisher last ran
#   vfhealth_textfile_last_success_timestamp_seconds  when it last read the mount
# When the mount cannot be read (vfhealthd down, store gone), the last good
# vfhealth series are kept as they were (a quarantined VF stays visible) and
# only these three are updated; the rules in vfhealth.rules.yml then fire
# VfhealthMetricsStale on the success timestamp.  Exit 1 in that case.
#
# Written atomically and without following symlinks, since TEXTFILE_DIR
# belongs to another user (prometheus): the temporary file is created with
# O_EXCL under a random name (bash's noclobber), so neither a planted file
# nor a symlink is written through; everything goes through that one
# descriptor, which is fsynced; rename(2) then replaces vfhealth.prom (a
# symlink planted there is replaced, not followed).  The previous copy is
# read with O_NOFOLLOW and only its vfhealth_ lines are kept.
set -euo pipefail

mount=/run/vfhealth
dir=/var/lib/prometheus/node-exporter
while (($#)); do
	case $1 in
	--mount) mount=${2:?}; shift 2 ;;
	--dir) dir=${2:?}; shift 2 ;;
	-h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "vfhealth-textfile: unknown argument: $1" >&2; exit 2 ;;
	esac
done

out=$dir/vfhealth.prom
self=vfhealth_textfile_
now=$(date +%s)
umask 022 # the copy is 0644: node_exporter runs as another user
set -o noclobber
tmp=
trap '[[ -z $tmp ]] || rm -f -- "$tmp"' EXIT
# open_tmp: a new temporary file on descriptor 3.  The collector reads only
# *.prom, so the temporary name is ignored until renamed.
open_tmp() {
	[[ -z $tmp ]] || rm -f -- "$tmp"
	tmp=$(mktemp -u -- "$dir/.vfhealth.prom.XXXXXXXX")
	exec 3> "$tmp"
}

# vfhealth_ lines of a previous copy, minus the publisher's own (O_NOFOLLOW:
# a symlink planted at OUT is not read).
previous() {
	dd if="$out" iflag=nofollow status=none 2>/dev/null |
		grep -E '^(# (HELP|TYPE) )?vfhealth_' | grep -Ev "^(# (HELP|TYPE) )?$self" || true
}
# The last success recorded in the previous copy, 0 when none.
previous_success() {
	previous_all=$(dd if="$out" iflag=nofollow status=none 2>/dev/null || true)
	awk -v m="${self}last_success_timestamp_seconds" '$1 == m && $2 ~ /^[0-9]+$/ { v = $2 } END { print v + 0 }' \
		<<<"$previous_all"
}
status() { # OK LAST_SUCCESS
	cat <<-EOF
	# HELP ${self}scrape_ok Whether vfhealth-textfile.sh read the metrics file on its last run.
	# TYPE ${self}scrape_ok gauge
	${self}scrape_ok $1
	# HELP ${self}last_run_timestamp_seconds When vfhealth-textfile.sh last ran (Unix time).
	# TYPE ${self}last_run_timestamp_seconds gauge
	${self}last_run_timestamp_seconds $now
	# HELP ${self}last_success_timestamp_seconds When vfhealth-textfile.sh last read the metrics file (Unix time; 0: never).
	# TYPE ${self}last_success_timestamp_seconds gauge
	${self}last_success_timestamp_seconds $2
	EOF
}

rc=0
open_tmp
if cat -- "$mount/metrics" >&3 2>/dev/null && grep -q '^vfhealth_' /dev/fd/3; then
	status 1 "$now" >&3
else
	echo "vfhealth-textfile: cannot read $mount/metrics; keeping the last copy in $out" >&2
	open_tmp # whatever was read is dropped
	{ previous; status 0 "$(previous_success)"; } >&3
	rc=1
fi
sync -- /dev/fd/3 2>/dev/null || true
exec 3>&-
mv -fT -- "$tmp" "$out"
tmp=
sync -- "$dir" 2>/dev/null || true
exit "$rc"
