#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2034 # the variables are for the scripts that source this
# tests/systemd/lib.sh - the systemd suite's helpers on top of the harness
# (tests/lib/harness.sh: temp dir $T, cleanup, waits, skip and fail): the
# Debian packages built from a copy of the tree, and checks that name
# themselves.
#
# Environment (tests/systemd/meson.build): VFHEALTH_SOURCE_ROOT, and
#   VFHEALTH_DEB_DIR  where the package test leaves the .debs it built, for
#                     the boot test (which builds them itself when absent)
# shellcheck source=../lib/harness.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/../lib/harness.sh"

source_root=${VFHEALTH_SOURCE_ROOT:?run under meson test}
deb_dir=${VFHEALTH_DEB_DIR:?run under meson test}

# check NAME COMMAND...: one named check; a failure is counted, the next
# checks still run (finish_checks fails the test).
check_failures=0
check() {
	local name=$1
	shift
	if "$@"; then
		pass "$name"
	else
		not_ok "$name"
		check_failures=$((check_failures + 1))
	fi
}
finish_checks() {
	((check_failures == 0)) || fail "$check_failures check(s) failed"
}

# copy_tree DIR: the files a clean clone has (the tracked ones, with their
# changes, and new ones git does not ignore), never a build directory.
copy_tree() {
	mkdir -p "$1"
	if git -C "$source_root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		# Tracked files deleted in the work tree are left out.
		# shellcheck disable=SC2016 # the inner shell's own variables
		git -C "$source_root" ls-files -z --cached --others --exclude-standard |
			(cd "$source_root" && xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh) |
			tar -C "$source_root" --null -T - -cf - | tar -C "$1" -xf -
	else
		tar -C "$source_root" --exclude='./build*' -cf - . | tar -C "$1" -xf -
	fi
}

# build_debs: dpkg-buildpackage -b -us -uc in a copy of the tree (so that no
# build directory of the clone is touched); the .debs, the .changes and the
# build log go to $deb_dir.
build_debs() {
	local src=$T/pkg/vfhealth
	copy_tree "$src"
	(cd "$src" && dpkg-buildpackage -b -us -uc) >"$T/dpkg-buildpackage.log" 2>&1 || {
		tail -n 40 "$T/dpkg-buildpackage.log" >&2
		fail "dpkg-buildpackage -b -us -uc failed"
	}
	rm -rf "$deb_dir"
	mkdir -p "$deb_dir"
	cp "$T/pkg/"*.deb "$T/pkg/"*.changes "$T/pkg/"*.buildinfo "$T/dpkg-buildpackage.log" "$deb_dir/"
}
