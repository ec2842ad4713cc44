#!/usr/bin/env bash
# dev-configure.sh - `./dev.sh run` on a machine where meson cannot configure
# the build shows meson's error and what to install, and exits 1 without
# running anything.  pkg-config is given a search path (PKG_CONFIG_LIBDIR)
# holding every .pc file of this machine but fuse3's:
#   * without fuse3: meson's "Dependency "fuse3" not found" and the package
#     that provides it (libfuse3-dev);
#   * with a fuse3 below the floor (a fuse3.pc saying 3.10.5, Ubuntu 22.04's):
#     meson's error with both versions, and where to read what to do.
# The floor itself is checked against meson.build: the same version.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_cmd pkg-config
fuse_pc=$(pkg-config --variable=pcfiledir fuse3 2>/dev/null)/fuse3.pc || true
[[ -f $fuse_pc ]] || skip "no fuse3.pc on this machine"

pcdir=$T/pkgconfig
mkdir -p "$pcdir"
IFS=: read -r -a pc_path <<<"$(pkg-config --variable=pc_path pkg-config)"
for d in "${pc_path[@]}"; do
	for pc in "$d"/*.pc; do
		[[ -f $pc && ${pc##*/} != fuse3.pc && ! -e $pcdir/${pc##*/} ]] && ln -s "$pc" "$pcdir/"
	done
done

floor=$(sed -nE "s/^fuse_dep = dependency\('fuse3', version: '>= ([0-9.]+)'\)/\1/p" "$source_root/meson.build")
[[ -n $floor ]] || fail "meson.build has no fuse3 floor"

# run_dev NAME: ./dev.sh run with our pkg-config search path, into $T/NAME.out.
run_dev() {
	local rc=0
	BUILD_DIR=$T/build-$1 PKG_CONFIG_LIBDIR=$pcdir timeout -k 5 100 "$source_root/dev.sh" run \
		>"$T/$1.out" 2>&1 || rc=$?
	if grep -q '^dev.sh: missing packages' "$T/$1.out"; then
		skip "$(head -n 1 "$T/$1.out")"
	fi
	[[ $rc == 1 ]] || { cat "$T/$1.out" >&2; fail "$1: ./dev.sh run exited $rc, want 1"; }
	[[ ! -e $T/build-$1/build.ninja ]] || fail "$1: a build was configured"
}
shows() { # NAME TEXT: the output of run NAME has TEXT.
	grep -qF -- "$2" "$T/$1.out" || { cat "$T/$1.out" >&2; fail "$1: the output lacks: $2"; }
}

run_dev missing
shows missing 'ERROR: Dependency "fuse3" not found'
shows missing 'dev.sh: install libfuse3-dev'

sed 's/^Version:.*/Version: 3.10.5/' "$fuse_pc" > "$pcdir/fuse3.pc"
run_dev old
shows old "need 'fuse3' ['>= $floor'] found '3.10.5'"
shows old "dev.sh: fuse3 3.10.5 is installed, vfhealth needs fuse3 >= $floor"
shows old 'README.md, "Building by hand"'
# ... and the README says what to do, for the same floor.
grep -qF "fuse3 >= $floor" "$source_root/README.md" || fail "README.md does not name the floor $floor"
grep -qF 'on an older release (Ubuntu 22.04 has 3.10) build libfuse' "$source_root/README.md" ||
	fail "README.md does not say how to get libfuse $floor"
echo "dev-configure OK"
