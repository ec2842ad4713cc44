#!/usr/bin/env bash
# dev.sh - the two quick-start commands of vfhealth, on Debian 12 as root.
#
#   ./dev.sh run    install what is missing, build, and run the demo: vfhealthd
#                   on a mount and database of its own (simulated guests, the
#                   sentinel, a wedged VF quarantined), on any host
#   ./dev.sh test   install what is missing, build with ASan and UBSan and
#                   warnings as errors, and run every test
#
# Environment: BUILD_DIR (default build, or build-run for `run`),
# MESON_TEST_ARGS (extra arguments to `meson test`, e.g. "--suite store").
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

# What the build and the tests need, as Debian package names.
build_pkgs=(gcc libc6-dev pkg-config meson ninja-build libfuse3-dev fuse3
	    libsqlite3-dev libprotobuf-c-dev protobuf-c-compiler check libsystemd-dev)
run_pkgs=(fuse3 sqlite3 util-linux procps)
test_pkgs=(inotify-tools sqlite3 util-linux procps python3 valgrind e2fsprogs strace
	   clang libclang-rt-14-dev man-db groff-base bsdextrautils clang-format)
# promtool (checks the metrics and the alert rules) ships in Debian's prometheus.
promtool_pkg=prometheus
# node_exporter scrapes the textfile example; shellcheck lints every script.
extra_test_pkgs=(prometheus-node-exporter shellcheck)
# The guest-kernel test (tests/kernel): QEMU, a static busybox and cpio for the
# initramfs, and the headers of the kernel it boots (linux-headers-ABI, ABI
# from tests/kernel/kernel-abi.sh) to build its test module.  The test
# downloads the kernel image itself (apt-get download), never installs it.
kernel_test_pkgs=(qemu-system-x86 busybox-static cpio)
# The libvirt hook's test (tests/integrations): a real libvirtd, which the
# test starts itself in private namespaces (it also needs qemu-system-x86).
libvirt_test_pkgs=(libvirt-daemon-system libvirt-clients)

die() { echo "dev.sh: $*" >&2; exit 1; }

missing_pkgs() {
	local p
	for p in "$@"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
			echo "$p"
	done
}

install_pkgs() {
	local missing
	mapfile -t missing < <(missing_pkgs "$@")
	((${#missing[@]})) || return 0
	[[ $(id -u) -eq 0 ]] || die "missing packages: ${missing[*]} (run as root, or install them)"
	echo "dev.sh: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# pkg-config names and programs meson looks for, and the Debian package
# that provides each (build_pkgs installs them all).
declare -A pkg_of=(
	[fuse3]=libfuse3-dev [sqlite3]=libsqlite3-dev [libprotobuf-c]=libprotobuf-c-dev
	[protoc-c]=protobuf-c-compiler [check]=check [libsystemd]=libsystemd-dev
	[valgrind]=valgrind [pkg-config]=pkg-config [cc]=gcc [c]=gcc
)

# configure_failed OUTPUT: meson's own error (it prints it on stdout), then
# what to install for each dependency or program it did not find.
configure_failed() {
	local out=$1 name found need
	echo "dev.sh: meson could not configure the build:" >&2
	grep -E 'ERROR:|found: NO|Invalid version|not found' <<<"$out" | sed 's/^/  /' >&2 ||
		tail -n 20 <<<"$out" | sed 's/^/  /' >&2
	while IFS= read -r name; do
		re="need '$name' \\['([^']*)'\\] found '([^']*)'"
		if [[ $out =~ $re ]]; then
			need=${BASH_REMATCH[1]} found=${BASH_REMATCH[2]}
			echo "dev.sh: $name $found is installed, vfhealth needs $name $need" \
				"(${pkg_of[$name]:-$name} of Debian 12 or Ubuntu 24.04);" \
				"on an older release see README.md, \"Building by hand\"" >&2
		else
			echo "dev.sh: install ${pkg_of[$name]:-the package that provides $name}" \
				"(apt-get install ${pkg_of[$name]:-$name}; ./dev.sh does it when run as root)" >&2
		fi
	done < <(grep -oE -e 'Dependency "[^"]+" not found' -e 'Dependency lookup for [^ ]+ ' \
			-e "Program '[^']+' not found" -e 'Unknown compiler' <<<"$out" |
		sed -E -e 's/^Dependency "([^"]+)".*/\1/' -e 's/^Dependency lookup for ([^ ]+) /\1/' \
			-e "s/^Program '([^']+)'.*/\\1/" -e 's/^Unknown compiler.*/cc/' | sort -u)
	exit 1
}

# Configure once; reconfigure only when the options change.
setup_build() {
	local dir=$1 out; shift
	if [[ -f $dir/build.ninja ]]; then
		out=$(meson configure "$dir" "$@" 2>&1) || configure_failed "$out"
	else
		out=$(meson setup "$dir" "$@" 2>&1) || configure_failed "$out"
	fi
	meson compile -C "$dir"
}

# The demo, never the production service: its own mount and database in the
# build directory (examples/demo.sh), also on a host with a GPU.
cmd_run() {
	install_pkgs "${build_pkgs[@]}" "${run_pkgs[@]}"
	local dir=${BUILD_DIR:-build-run}
	setup_build "$dir" -Db_sanitize=none -Dtests=true
	exec examples/demo.sh --build "$dir" "$@"
}

# The headers package of the kernel the guest-kernel test boots; the package
# lists are fetched first on a fresh machine that has none.
kernel_headers_pkg() {
	local abi
	abi=$(tests/kernel/kernel-abi.sh) ||
		{ [[ $(id -u) -ne 0 ]] || apt-get update -qq; abi=$(tests/kernel/kernel-abi.sh); } ||
		{ echo "dev.sh: apt knows no linux-image-amd64: the kernel test will skip" >&2; return 0; }
	echo "linux-headers-$abi"
}

cmd_test() {
	local headers
	headers=$(kernel_headers_pkg)
	install_pkgs "${build_pkgs[@]}" "${test_pkgs[@]}" "$promtool_pkg" "${extra_test_pkgs[@]}" \
		"${kernel_test_pkgs[@]}" "${libvirt_test_pkgs[@]}" ${headers:+"$headers"}
	local dir=${BUILD_DIR:-build} rc=0
	setup_build "$dir" -Dwerror=true -Db_sanitize=address,undefined -Dtests=true
	# shellcheck disable=SC2086
	meson test -C "$dir" --print-errorlogs --num-processes "$(nproc)" ${MESON_TEST_ARGS:-} || rc=1

	# valgrind cannot run ASan binaries: the unit suites again, under memcheck,
	# from a build without sanitizers.  Any memory error or leak fails.
	if [[ -z ${MESON_TEST_ARGS:-} ]]; then
		setup_build "$dir-valgrind" -Dwerror=true -Db_sanitize=none -Dtests=true
		meson test -C "$dir-valgrind" --setup valgrind --suite unit --print-errorlogs \
			--num-processes "$(nproc)" || rc=1
	fi
	return $rc
}

case "${1:-}" in
run) shift; cmd_run "$@" ;;
test) shift; cmd_test "$@" ;;
*) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
