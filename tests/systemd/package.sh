#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# package.sh - the Debian packages: `dpkg-buildpackage -b -us -uc` in a copy
# of the tree builds vfhealth and vfhealth-agent; lintian reports no error
# and no warning on them (its whole output is printed); and what they hold:
#   - the release build (no sanitizer runtime, no test program),
#   - the /etc/default files as conffiles,
#   - the units, tmpfiles.d and sysusers.d entries, and their maintainer
#     scripts from debhelper (systemd-tmpfiles and systemd-sysusers at
#     configure).
# The boot test (boot.sh) installs, upgrades and purges them under systemd
# (and sees that the install enables and starts nothing).
# Skips (77) without dpkg-buildpackage, debhelper or lintian.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
for tool in dpkg-buildpackage dh lintian; do
	command -v "$tool" >/dev/null || skip "$tool not installed (./dev.sh test installs it)"
done

# No .deb of an earlier run is left for the boot test to install.
rm -rf "$deb_dir"
build_debs
echo "ok   dpkg-buildpackage -b -us -uc in a copy of the tree"
host=$(compgen -G "$deb_dir/vfhealth_*_*.deb" | head -n1) || true
agent=$(compgen -G "$deb_dir/vfhealth-agent_*_*.deb" | head -n1) || true
[[ -f $host && -f $agent ]] || fail "no vfhealth or vfhealth-agent .deb in $deb_dir: $(ls "$deb_dir")"

# Lintian: every tag it prints is shown; an error or a warning fails.
rc=0
lintian --fail-on error,warning --display-info "$deb_dir"/*.changes >"$T/lintian.out" 2>&1 || rc=$?
sed 's/^/  lintian: /' "$T/lintian.out"
check "lintian reports no error and no warning" test "$rc" = 0

x=$T/x
mkdir -p "$x"
dpkg-deb -R "$host" "$x/host"
dpkg-deb -R "$agent" "$x/agent"
conffiles() { sort "$1/DEBIAN/conffiles" 2>/dev/null | tr '\n' ' '; }
check "vfhealth's conffiles are its /etc/default files" \
	test "$(conffiles "$x/host")" = "/etc/default/vfhealth-libvirt-hook /etc/default/vfhealth-slurm-check /etc/default/vfhealthd "
check "vfhealth-agent's conffile is /etc/default/vfhealth-agent" \
	test "$(conffiles "$x/agent")" = "/etc/default/vfhealth-agent "
for f in usr/sbin/vfhealthd usr/sbin/vfhealth-sentinel lib/systemd/system/vfhealthd.service \
	 usr/lib/tmpfiles.d/vfhealth.conf usr/lib/sysusers.d/vfhealth.conf \
	 usr/libexec/vfhealth/on-quarantine-change.sh usr/share/man/man8/vfhealthd.8.gz \
	 usr/share/doc/vfhealth/examples/systemd/vfhealth-quarantine.path usr/share/doc/vfhealth/copyright; do
	check "vfhealth holds /$f" test -e "$x/host/$f"
done
for f in usr/sbin/vfhealth-agent lib/systemd/system/vfhealth-agent.service; do
	check "vfhealth-agent holds /$f" test -e "$x/agent/$f"
done
check "the guest's agent is not in the host's package" test ! -e "$x/host/usr/sbin/vfhealth-agent"
no_sanitizer() { ! readelf -d "$1" | grep -qE 'lib(a|ub|t)san'; }
for b in "$x/host/usr/sbin/vfhealthd" "$x/host/usr/sbin/vfhealth-sentinel" "$x/agent/usr/sbin/vfhealth-agent"; do
	check "${b#"$x/"} links no sanitizer runtime" no_sanitizer "$b"
done
check "no test program is packaged" test -z "$(find "$x" -name 'vftool*' -o -name 'test-*' -o -name '*vfbench*')"
check "configure runs systemd-sysusers vfhealth.conf" grep -q 'systemd-sysusers .*vfhealth.conf' "$x/host/DEBIAN/postinst"
check "configure runs systemd-tmpfiles --create vfhealth.conf" \
	grep -q 'systemd-tmpfiles .*--create vfhealth.conf' "$x/host/DEBIAN/postinst"
finish_checks
echo "package OK"
