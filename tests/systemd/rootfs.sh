#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# rootfs.sh - print the path of a Debian 12 root file system with systemd
# (a tar), building it with mmdebstrap when the cache lacks it.
#
#   rootfs.sh [CACHE_DIR]     default /var/cache/vfhealth-tests
#
# The tar is named after the package list, so a changed list builds a new
# one; a build takes a few minutes once (the archive's download), later runs
# reuse it.  What vfhealth's package depends on is in the list, so that the
# .deb installs with dpkg alone (no network at test time).
set -euo pipefail

cache=${1:-/var/cache/vfhealth-tests}
pkgs=(systemd systemd-sysv dbus login procps util-linux fuse3 libfuse3-3 libsqlite3-0
      libprotobuf-c1 libsystemd0 sqlite3 inotify-tools)
key=$(printf '%s\n' "${pkgs[@]}" | sha256sum | cut -c1-12)
tar=$cache/bookworm-systemd-$key.tar

if [[ ! -s $tar ]]; then
	command -v mmdebstrap >/dev/null || { echo "rootfs.sh: mmdebstrap is not installed" >&2; exit 77; }
	mkdir -p "$cache"
	# mmdebstrap chooses the format by the name's end and writes a new file.
	tmp=$tar.$$.tmp.tar
	trap 'rm -f "$tmp"' EXIT
	# A lock: two test runs never build the same tar side by side.
	exec 9>"$cache/.lock"
	flock 9
	if [[ ! -s $tar ]]; then
		echo "rootfs.sh: building $tar with mmdebstrap (a few minutes, once)" >&2
		list=$(IFS=,; echo "${pkgs[*]}")
		# shellcheck disable=SC2016 # $1 is the hook's: the new root
		mmdebstrap --quiet --variant=minbase --include="$list" \
			--customize-hook='echo vfhealth-test > "$1/etc/hostname"' \
			--customize-hook='rm -f "$1/etc/machine-id"; : > "$1/etc/machine-id"' \
			bookworm "$tmp" >&2
		mv -f -- "$tmp" "$tar"
	fi
fi
echo "$tar"
