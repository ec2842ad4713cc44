#!/usr/bin/env bash
# baseline.sh SOURCE_ROOT BUILD_DIR COMMIT - build vfhealthd (and the
# vfhealth-sentinel it runs beside it) as it was at COMMIT, for
# run-benchmarks.sh to measure the current daemon against, and print the
# path of that vfhealthd.  The tree comes from `git archive` (the checkout
# is not touched) and is built like the figures' own build (release, no
# sanitizers) under BUILD_DIR/bench-baseline/COMMIT, where it stays: a
# later run finds it built and only prints the path.
#
# Exit 0 with the path on stdout; exit 2 with the reason on stderr when
# there is nothing to build from (SOURCE_ROOT is not a git checkout, or
# does not have COMMIT): the caller skips the figure and says why.  Any
# other failure (a build that breaks) is exit 1.
set -euo pipefail
src=${1:?usage: baseline.sh SOURCE_ROOT BUILD_DIR COMMIT}
build=${2:?usage: baseline.sh SOURCE_ROOT BUILD_DIR COMMIT}
commit=${3:?usage: baseline.sh SOURCE_ROOT BUILD_DIR COMMIT}
dir=$build/bench-baseline/$commit
daemon=$dir/build/daemon/vfhealthd

if [[ -x $daemon && -x $dir/build/daemon/vfhealth-sentinel ]]; then
	echo "$daemon"
	exit 0
fi
if ! git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
	echo "$src is not a git checkout" >&2
	exit 2
fi
if ! git -C "$src" cat-file -e "$commit^{commit}" 2>/dev/null; then
	echo "the checkout at $src does not have commit $commit" >&2
	exit 2
fi
rm -rf -- "$dir"
mkdir -p "$dir/src"
git -C "$src" archive "$commit" | tar -x -C "$dir/src"
{
	meson setup "$dir/build" "$dir/src" -Dbuildtype=release -Db_sanitize=none -Dtests=false &&
		meson compile -C "$dir/build" daemon/vfhealthd daemon/vfhealth-sentinel
} >"$dir/build.log" 2>&1 || {
	echo "building $commit failed: $dir/build.log" >&2
	exit 1
}
echo "$daemon"
