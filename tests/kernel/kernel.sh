#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/kernel/kernel.sh - the whole detection path inside a real guest kernel.
#
# Boots Debian's kernel (linux-image-ABI-amd64, downloaded and unpacked, never
# installed) under QEMU with software emulation (TCG: nested KVM hangs in the
# firmware on these machines), with an initramfs built from this build tree:
# busybox, vfhealth-agent, vfhealthd, vfhealth-sentinel, test-vmm and the shared libraries they
# use, the kernel's vsock, vsock_loopback and fuse modules, and vfh_nvrm.ko, a
# tiny module built against the matching linux-headers that prints the
# driver's failure line from the kernel.  guest-init.sh runs the checks in
# the guest and prints "VFHK: ..." lines on the serial console; this script
# parses them.
#
# Downloads and the module build are cached in CACHE (under the build dir),
# so a repeated run only rebuilds the initramfs and boots.
#
# Skips (77) only where QEMU, busybox-static or cpio is missing, or the kernel
# package (or its matching headers) cannot be had; ./dev.sh installs all of
# them.
#
# usage: kernel.sh SRCDIR CACHE AGENT VFHEALTHD TEST_VMM
set -euo pipefail

SRC=$1 CACHE=$2 AGENT=$3 VFHEALTHD=$4 TEST_VMM=$5 SENTINEL=$6
# The guest's own deadline is GUEST_TIMEOUT (about 15 s on an idle machine,
# a minute when its two cores are busy); QEMU is killed a little later, well
# inside the meson timeout (240 s).
GUEST_TIMEOUT=${VFHK_GUEST_TIMEOUT:-150}

# Output is TAP, one result (meson's protocol: 'tap'): fd 3 is the TAP
# stream, the script's own output goes to stderr.  A death by set -e or a
# signal is reported too.
exec 3>&1 1>&2
tap_done=
trap 'rc=$?; [[ -n $tap_done ]] || printf "not ok 1 - kernel.sh died: exit status %d\n1..1\n" "$rc" >&3' EXIT
skip() {
	echo "SKIP: $*"
	printf '1..0 # SKIP %s\n' "$*" >&3
	tap_done=1
	exit 0
}
fail() {
	echo "FAIL: $*" >&2
	if [[ -f ${CONSOLE:-} ]]; then
		echo "--- guest console (last 60 lines) ---" >&2
		tail -n 60 "$CONSOLE" >&2
	fi
	printf 'not ok 1 - %s\n1..1\n' "${*//$'\n'/ }" >&3
	tap_done=1
	exit 1
}

QEMU=$(command -v qemu-system-x86_64 || true)
[[ -n $QEMU ]] || skip "no qemu-system-x86_64 (Debian package qemu-system-x86)"
BUSYBOX=$(command -v busybox || true)
if [[ -z $BUSYBOX ]] || ldd "$BUSYBOX" >/dev/null 2>&1; then
	skip "no static busybox (Debian package busybox-static)"
fi
command -v cpio >/dev/null || skip "no cpio"

# The kernel: linux-image-amd64's current ABI (kernel-abi.sh; dev.sh installs
# its headers), else the newest ABI whose headers are installed; its image is
# downloaded into the cache.
ABI=$("$SRC/tests/kernel/kernel-abi.sh" || true)
if [[ -z $ABI || ! -f /usr/src/linux-headers-$ABI/Makefile ]]; then
	ABI=$(find /usr/src -maxdepth 2 -path '/usr/src/linux-headers-*-amd64/Makefile' |
		sed 's|^/usr/src/linux-headers-||; s|/Makefile$||' | sort -V | tail -n 1)
fi
[[ -n $ABI ]] ||
	skip "no /usr/src/linux-headers-ABI-amd64 to build the test module (./dev.sh installs it)"
KDIR=$CACHE/$ABI
mkdir -p "$CACHE"
if [[ ! -f $KDIR/ok ]]; then
	rm -rf "$KDIR" "$CACHE/dl"
	mkdir -p "$CACHE/dl"
	(cd "$CACHE/dl" && apt-get download -q "linux-image-$ABI" >download.log 2>&1) ||
		skip "cannot download linux-image-$ABI: $(tail -n 1 "$CACHE/dl/download.log")"
	mkdir -p "$KDIR"
	# Only what the guest needs: the image and the modules below.
	dpkg-deb --fsys-tarfile "$CACHE"/dl/linux-image-*.deb |
		tar -x -C "$KDIR" --wildcards './boot/vmlinuz-*' \
			"./lib/modules/$ABI/kernel/net/vmw_vsock/*" "./lib/modules/$ABI/kernel/fs/fuse/*" ||
		fail "cannot unpack linux-image-$ABI"
	rm -rf "$CACHE/dl"
	touch "$KDIR/ok"
fi
VMLINUZ=$KDIR/boot/vmlinuz-$ABI
MODDIR=$KDIR/lib/modules/$ABI/kernel

# The stand-in driver module, built once per ABI and source.
MOD=$CACHE/mod-$ABI
if [[ ! -f $MOD/vfh_nvrm.ko || $SRC/tests/kernel/vfh_nvrm.c -nt $MOD/vfh_nvrm.ko ]]; then
	rm -rf "$MOD"
	mkdir -p "$MOD"
	cp "$SRC/tests/kernel/vfh_nvrm.c" "$SRC/tests/kernel/Kbuild" "$MOD/"
	make -s -C "/usr/src/linux-headers-$ABI" M="$MOD" modules >"$MOD/build.log" 2>&1 ||
		fail "building vfh_nvrm.ko against linux-headers-$ABI: $(tail -n 5 "$MOD/build.log")"
fi

# The initramfs, fresh every run (the binaries change).
W=$CACHE/run
rm -rf "$W"
ROOT=$W/root
mkdir -p "$ROOT"/{bin,sbin,dev,proc,sys,tmp,run,mnt,etc,lib/modules,fakesys}
cp "$BUSYBOX" "$ROOT/bin/busybox"
ln -s busybox "$ROOT/bin/sh"
# vfhealthd runs the vfhealth-sentinel beside its own executable: both in /bin.
for b in "$AGENT" "$VFHEALTHD" "$SENTINEL" "$TEST_VMM"; do
	cp "$b" "$ROOT/bin/"
	# Dynamic (the sanitizer builds): every library at the path ld.so wants.
	ldd "$b" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
		[[ -e $ROOT$lib ]] && continue
		mkdir -p "$ROOT$(dirname "$lib")"
		cp -L "$lib" "$ROOT$lib"
	done
done
# Kernel modules in load order: a module after every one it depends on
# (from each module's own modinfo: the package has no modules.dep).
load_order=()
add_module() {
	local name=$1 ko dep deps
	for m in "${load_order[@]}"; do [[ $m == "$name" ]] && return 0; done
	ko=$(find "$MODDIR" -name "$name.ko" | head -n 1)
	[[ -n $ko ]] || fail "module $name not in linux-image-$ABI"
	deps=$(tr '\0' '\n' <"$ko" | sed -n 's/^depends=//p' | head -n 1)
	for dep in ${deps//,/ }; do add_module "$dep"; done
	cp "$ko" "$ROOT/lib/modules/"
	load_order+=("$name")
}
for m in vsock_loopback fuse; do add_module "$m"; done
printf '%s\n' "${load_order[@]}" >"$ROOT/lib/modules/order"
cp "$MOD/vfh_nvrm.ko" "$ROOT/lib/modules/"
cp "$SRC/tests/kernel/guest-init.sh" "$ROOT/init"
chmod +x "$ROOT/init"
(cd "$ROOT" && find . | cpio -o -H newc --quiet | gzip -1) >"$W/initrd.gz"

CONSOLE=$W/console.log
start=$(date +%s%N)
rc=0
timeout $((GUEST_TIMEOUT + 30)) "$QEMU" -accel tcg -cpu max -m 1024 -smp 1 \
	-nographic -no-reboot -monitor none -nodefaults -serial stdio \
	-kernel "$VMLINUZ" -initrd "$W/initrd.gz" \
	-append "console=ttyS0 panic=-1 loglevel=4 vfhk.timeout=$GUEST_TIMEOUT" \
	</dev/null >"$CONSOLE" 2>&1 || rc=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
echo "guest ran ${elapsed_ms} ms (qemu exit $rc)"
((rc != 124)) || fail "the guest did not finish within $((GUEST_TIMEOUT + 30))s"

tr -d '\r' <"$CONSOLE" | sed -n 's/^VFHK: //p' >"$W/results"
cat "$W/results"
grep -q '^BEGIN' "$W/results" || fail "the guest never ran its checks (no VFHK: BEGIN)"
if grep -q '^FAIL' "$W/results"; then
	fail "in the guest: $(grep '^FAIL' "$W/results" | head -n 1 | cut -c6-)"
fi
grep -q '^END PASS' "$W/results" || fail "the guest stopped before its last check"
printf 'ok 1 - the guest kernel ran every check (%s)\n1..1\n' "$ABI" >&3
tap_done=1
