#!/usr/bin/env bash
# dev.sh - the two quick-start commands of vfhealth, on Debian 12 as root.
#
#   ./dev.sh run    install what is missing, build, and run the demo: vfhealthd
#                   on a mount and database of its own (simulated guests, the
#                   sentinel, a wedged VF quarantined), on any host
#   ./dev.sh test   install what is missing, build with ASan and UBSan and
#                   warnings as errors, and run every test; then the unit
#                   suites under valgrind, the tree built with clang (its
#                   unit and fuzz-replay suites run), the unit suites and
#                   the threaded scripts under ThreadSanitizer, and
#                   clang-tidy's bug-prone checks (a finding fails)
#
# Environment: BUILD_DIR (default build, or build-run for `run`),
# MESON_TEST_ARGS (extra arguments to `meson test`, e.g. "--suite store":
# then only that run, none of the later steps).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

# What the build and the tests need, as Debian package names.
build_pkgs=(gcc libc6-dev pkg-config meson ninja-build libfuse3-dev fuse3
	    libsqlite3-dev libprotobuf-c-dev protobuf-c-compiler check libsystemd-dev)
# The demo's commands and the watcher it prints (inotifywait).
run_pkgs=(fuse3 sqlite3 util-linux procps inotify-tools)
test_pkgs=(inotify-tools sqlite3 util-linux procps python3 valgrind e2fsprogs strace
	   clang clang-tidy libclang-rt-14-dev man-db groff-base bsdextrautils clang-format)
# The suite systemd (tests/systemd): the Debian packages built with debhelper
# and checked with lintian, then booted under systemd in a container that
# mmdebstrap builds once (systemd-nspawn; nsenter and script are essential).
systemd_test_pkgs=(dpkg-dev debhelper lintian mmdebstrap systemd systemd-container)
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
# The Slurm health check's test (tests/integrations/slurm-real.sh): a real
# munged, slurmctld and slurmd, which the test starts itself on private ports.
slurm_test_pkgs=(slurmctld slurmd slurm-client munge)

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

# Configure once; reconfigure only when the options change.  The compiler
# is CC's (gcc by default) and stays the one the directory was set up with.
setup_build() {
	local dir=$1 out; shift
	if [[ -f $dir/build.ninja ]]; then
		out=$(meson configure "$dir" "$@" 2>&1) || configure_failed "$out"
	else
		out=$(meson setup "$dir" "$@" 2>&1) || configure_failed "$out"
	fi
	meson compile -C "$dir"
}

# step NAME COMMAND...: run one step of the test run, say how long it took,
# and remember a failure without stopping the later steps.
failed_steps=()
step() {
	local name=$1 start=$SECONDS rc=0
	shift
	echo "dev.sh: == $name" >&2
	"$@" || rc=$?
	echo "dev.sh: == $name: $( ((rc)) && echo "FAILED" || echo ok) in $((SECONDS - start)) s" >&2
	((rc == 0)) || failed_steps+=("$name")
}

# A test run on a busy machine takes longer than on a quiet one: each
# test's meson timeout is scaled (a test that passes is not slowed).
timeout_multiplier=${VFHEALTH_TIMEOUT_MULTIPLIER:-3}
run_tests() { # DIR [ARG...]
	local dir=$1
	shift
	meson test -C "$dir" --print-errorlogs --num-processes "$(nproc)" \
		--timeout-multiplier "$timeout_multiplier" "$@"
}

# clang-tidy's bug-prone checks (.clang-tidy) over the programs' sources,
# with the clang build's compile commands: any finding fails.
tidy() {
	local dir=$1 files
	mapfile -t files < <(find common proto grammar store fs sentinel recovery daemon guest-agent \
		-name '*.c' | sort)
	run-clang-tidy -quiet -j "$(nproc)" -p "$dir" "${files[@]}" >"$dir/clang-tidy.log" 2>&1 || {
		sed 's/\x1b\[[0-9;]*m//g' "$dir/clang-tidy.log" | grep -E -A3 'warning:|error:' >&2
		return 1
	}
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
		"${kernel_test_pkgs[@]}" "${libvirt_test_pkgs[@]}" "${slurm_test_pkgs[@]}" \
		"${systemd_test_pkgs[@]}" ${headers:+"$headers"}
	local dir=${BUILD_DIR:-build}
	setup_build "$dir" -Dwerror=true -Db_sanitize=address,undefined -Dtests=true
	# shellcheck disable=SC2086
	step "every test (gcc, ASan and UBSan)" run_tests "$dir" ${MESON_TEST_ARGS:-}
	if [[ -z ${MESON_TEST_ARGS:-} ]]; then
		# valgrind cannot run ASan binaries: the unit suites again, under
		# memcheck, from a build without sanitizers.  Any memory error or
		# leak fails.  Built at -O3, the release build's level, whose range
		# analysis warns where -O2 does not (format-truncation).
		setup_build "$dir-valgrind" -Dwerror=true -Db_sanitize=none -Doptimization=3 \
			-Dtests=true
		step "the unit suites under valgrind" \
			run_tests "$dir-valgrind" --setup valgrind --suite unit \
			--timeout-multiplier $((timeout_multiplier * 6))
		# The whole tree with clang (its warnings differ from gcc's), the
		# libFuzzer targets included; its unit and fuzz-replay suites run.
		CC=clang setup_build "$dir-clang" -Dwerror=true -Dfuzz=true \
			-Db_sanitize=address,undefined -Dtests=true
		step "the unit and fuzz suites built with clang" \
			run_tests "$dir-clang" --suite unit --suite fuzz
		# ThreadSanitizer: the unit suites and the scripts of the suite
		# "tsan" (the daemon's threads and the lock table under load); a
		# report fails the test (tests/lib/harness.sh, check_sanitizers).
		CC=clang setup_build "$dir-tsan" -Dwerror=true -Db_sanitize=thread -Dtests=true
		step "the unit suites and threaded scripts under ThreadSanitizer" \
			run_tests "$dir-tsan" --suite unit --suite tsan
		step "clang-tidy's bug-prone checks" tidy "$dir-clang"
	fi
	if ((${#failed_steps[@]})); then
		echo "dev.sh: failed: ${failed_steps[*]}" >&2
		return 1
	fi
}

case "${1:-}" in
run) shift; cmd_run "$@" ;;
test) shift; cmd_test "$@" ;;
*) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
