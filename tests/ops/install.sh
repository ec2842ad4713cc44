#!/usr/bin/env bash
# install.sh - `meson install --destdir` of the build under test into a
# temporary tree, then check the tree: every binary in sbindir and
# executable, the three man pages, the units naming the installed binaries
# and hardened (`systemd-analyze security` exposure at most 5.0 for
# vfhealthd.service and 3.0 for vfhealth-agent.service, no mount namespace
# for the daemon), the tmpfiles.d entry, both /etc/default files, the
# scripts units run in libexecdir (never under /usr/share/doc), the examples
# with their modes; and `systemd-analyze verify` on the units when it is
# available.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"

dest=$T/dest
meson install -C "$build_root" --destdir "$dest" --no-rebuild --quiet >"$T/install.log" 2>&1 ||
	{ cat "$T/install.log" >&2; fail "meson install failed"; }

# Where meson put things, from the build's own configuration.
intro=$(meson introspect "$build_root" --buildoptions)
opt() { python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]==sys.argv[1]))' "$1" <<<"$intro"; }
prefix=$(opt prefix)
abs() { [[ $1 == /* ]] && echo "$1" || echo "$prefix/$1"; }
sbindir=$(abs "$(opt sbindir)")
mandir=$(abs "$(opt mandir)")
datadir=$(abs "$(opt datadir)")
sysconfdir=$(abs "$(opt sysconfdir)")
libexecdir=$(abs "$(opt libexecdir)")/vfhealth
unitdir=$(opt systemdunitdir)
if [[ -z $unitdir ]]; then
	unitdir=$(pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null || true)
	[[ -n $unitdir ]] || unitdir=$prefix/lib/systemd/system
fi

errors=0
check() { # DESCRIPTION COMMAND...
	local what=$1; shift
	if "$@"; then echo "ok   $what"; else echo "FAIL $what" >&2; errors=$((errors + 1)); fi
}
mode_is() { [[ $(stat -c %a -- "$1") == "$2" ]]; }
is_elf() { [[ $(head -c4 -- "$1") == $'\x7fELF' ]]; }
renders_clean() { ! groff -man -ww -z -- "$1" 2>&1 | grep .; }
# Options that give a service its own mount namespace (systemd's
# exec_needs_mount_namespace(): PrivateNetwork= and PrivateIPC= remount /sys
# and /dev/mqueue in one), so that the FUSE mount would be invisible to the
# host; and PrivateUsers=, whose user namespace cannot mount for the host.
# ProtectClock= and ProtectHostname= need none and are allowed.
no_private_mounts() {
	! grep -Eq '^(PrivateTmp|PrivateDevices|PrivateMounts|PrivateUsers|PrivateNetwork|PrivateIPC|NetworkNamespacePath|IPCNamespacePath|ProtectSystem|ProtectHome|ProtectKernelTunables|ProtectKernelModules|ProtectControlGroups|ProtectKernelLogs|ProtectProc|ProcSubset|MountAPIVFS|ReadOnlyPaths|ReadWritePaths|InaccessiblePaths|ExecPaths|NoExecPaths|TemporaryFileSystem|BindPaths|BindReadOnlyPaths|MountImages|ExtensionImages|ExtensionDirectories|LogNamespace|MountFlags|RootDirectory|RootImage|DynamicUser)=' "$1"
}
# exposure_at_most UNIT LIMIT: `systemd-analyze security --offline` rates
# the unit file at or below LIMIT (0.0 best, 10.0 worst).
exposure_at_most() {
	local out level
	out=$(cd "$(dirname -- "$1")" && systemd-analyze security --offline=true --no-pager -- "./$(basename -- "$1")" 2>&1) || true
	level=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9][0-9]*\.[0-9]\).*/\1/p' <<<"$out")
	[[ -n $level ]] || { echo "$out" >&2; return 1; }
	echo "     exposure of $(basename -- "$1"): $level (limit $2)"
	python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)' "$level" "$2" ||
		{ grep '✗' <<<"$out" >&2; return 1; }
}
# no_exec_from_doc UNIT: no Exec*= of UNIT runs anything under /usr/share/doc
# (Debian Policy 12.3: documentation may be left out or removed).
no_exec_from_doc() { ! grep -E '^Exec[A-Za-z]*=' "$1" | grep -q "$datadir/doc/"; }
tmpfiles_apply() { # ROOT CONF
	systemd-tmpfiles --root="$1" --create "$2" &&
		[[ -d $1/run/vfhealth && -d $1/var/lib/vfhealth ]] &&
		[[ $(stat -c %a "$1/var/lib/vfhealth") == 700 ]]
}

# Binaries: the two daemons, and every other executable the build installs
# must land in sbindir too (nothing in bin).
for b in vfhealthd vfhealth-agent; do
	check "sbin/$b installed, mode 755" mode_is "$dest$sbindir/$b" 755
done
check "no binary outside sbindir" test -z "$(find "$dest" -type f -perm -u+x \
	-path "$dest$prefix/bin/*" 2>/dev/null)"
while IFS= read -r exe; do
	check "$(basename -- "$exe") is an ELF executable" is_elf "$exe"
done < <(find "$dest$sbindir" -type f)

# Man pages, in their sections.
check "vfhealthd(8)" test -s "$dest$mandir/man8/vfhealthd.8"
check "vfhealth-agent(8)" test -s "$dest$mandir/man8/vfhealth-agent.8"
check "vfhealth-sentinel(8)" test -s "$dest$mandir/man8/vfhealth-sentinel.8"
check "vfhealth(5)" test -s "$dest$mandir/man5/vfhealth.5"
for page in "$dest$mandir"/man*/*; do
	[[ -f $page ]] || continue
	# groff warns about bad requests and macros; a page must render clean.
	if command -v groff >/dev/null; then
		check "$(basename -- "$page") renders without warnings" renders_clean "$page"
	fi
done

# The daemon's unit.
unit=$dest$unitdir/vfhealthd.service
check "vfhealthd.service installed" test -f "$unit"
check "vfhealthd.service: Type=notify" grep -qx 'Type=notify' "$unit"
check "vfhealthd.service: Restart=on-failure" grep -qx 'Restart=on-failure' "$unit"
check "vfhealthd.service: ExecStart names $sbindir/vfhealthd" grep -q "^ExecStart=$sbindir/vfhealthd " "$unit"
# vfhealthd detaches only a dead mount itself; an unmount in the unit would
# detach a live one another vfhealthd serves (issue 11, rule 8).
check "vfhealthd.service: never unmounts /run/vfhealth blindly" \
	eval "! grep -Eq '^Exec[A-Za-z]*=.*(fusermount3? -u|umount)' '$unit'"
check "vfhealthd.service: no private mount namespace" no_private_mounts "$unit"
check "vfhealthd.service: StateDirectory=vfhealth, mode 0700" \
	eval "grep -qx StateDirectory=vfhealth '$unit' && grep -qx StateDirectoryMode=0700 '$unit'"
check "vfhealthd.service: UMask=0077" grep -qx 'UMask=0077' "$unit"
check "vfhealthd.service: NoNewPrivileges=yes" grep -qx 'NoNewPrivileges=yes' "$unit"
check "vfhealthd.service: a capability bounding set" grep -q '^CapabilityBoundingSet=CAP_' "$unit"
check "vfhealthd.service: EnvironmentFile names default/vfhealthd" \
	grep -qx "EnvironmentFile=-$sysconfdir/default/vfhealthd" "$unit"
check "vfhealthd.service: WantedBy=multi-user.target" grep -qx 'WantedBy=multi-user.target' "$unit"

# The guest agent's unit.
agent_unit=$dest$unitdir/vfhealth-agent.service
check "vfhealth-agent.service installed" test -f "$agent_unit"
check "vfhealth-agent.service: ExecStart names $sbindir/vfhealth-agent" grep -q "^ExecStart=$sbindir/vfhealth-agent\b" "$agent_unit"
check "vfhealth-agent.service: EnvironmentFile names default/vfhealth-agent" \
	grep -qx "EnvironmentFile=-$sysconfdir/default/vfhealth-agent" "$agent_unit"
if command -v systemd-analyze >/dev/null && systemd-analyze security --help 2>&1 | grep -q -- --offline; then
	check "vfhealthd.service: exposure at most 5.0" exposure_at_most "$unit" 5.0
	check "vfhealth-agent.service: exposure at most 3.0" exposure_at_most "$agent_unit" 3.0
else
	echo "note: systemd-analyze security --offline not available; exposure not rated"
fi

# tmpfiles.d: the mountpoint and the state directory.
tmpfiles=$dest$prefix/lib/tmpfiles.d/vfhealth.conf
check "tmpfiles.d/vfhealth.conf installed" test -f "$tmpfiles"
check "tmpfiles.d creates /run/vfhealth" grep -Eq '^d +/run/vfhealth +0755 ' "$tmpfiles"
check "tmpfiles.d creates /var/lib/vfhealth" grep -Eq '^d +/var/lib/vfhealth +0700 ' "$tmpfiles"
if command -v systemd-tmpfiles >/dev/null; then
	# Apply it to a scratch root: the entries must parse and create the dirs.
	check "systemd-tmpfiles --root creates both directories" \
		tmpfiles_apply "$T/tmpfiles-root" "$tmpfiles"
fi

# Options files, one per unit, each setting the variable its unit expands.
check "default/vfhealthd installed" grep -q '^VFHEALTHD_OPTIONS=' "$dest$sysconfdir/default/vfhealthd"
check "default/vfhealth-agent installed" grep -q '^VFHEALTH_AGENT_OPTIONS=' "$dest$sysconfdir/default/vfhealth-agent"

# Scripts that units and other programs run: in libexecdir, executable.
for x in on-quarantine-change.sh vfhealth-textfile.sh vfhealth-npd-check.sh vfhealth-slurm-check.sh \
	 vfhealth-qemu-hook; do
	check "libexec $x, mode 755" mode_is "$dest$libexecdir/$x" 755
done

# The integrations: the libvirt hook reads the settings file this install
# puts in place and is never enabled (nothing under /etc/libvirt); the
# node-problem-detector config is JSON naming the installed check.
check "default/vfhealth-libvirt-hook installed" \
	grep -q '^#VFHEALTH_MOUNT=' "$dest$sysconfdir/default/vfhealth-libvirt-hook"
check "the libvirt hook reads $sysconfdir/default/vfhealth-libvirt-hook" \
	grep -qx "CONFIG = \"$sysconfdir/default/vfhealth-libvirt-hook\"" "$dest$libexecdir/vfhealth-qemu-hook"
check "no libvirt hook enabled" test -z "$(find "$dest" -path '*/libvirt/hooks*' 2>/dev/null)"
npd_path() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["rules"][0]["path"])' "$1"; }
check "the npd monitor names the installed check" \
	test "$(npd_path "$dest$datadir/doc/vfhealth/examples/npd/vfhealth-monitor.json")" == "$libexecdir/vfhealth-npd-check.sh"

# Documentation and examples.
docdir=$dest$datadir/doc/vfhealth
for d in overview.md interface.md runbook.md security.md limits.md; do
	check "doc $d" test -s "$docdir/$d"
done
for x in placement/watch-quarantined.sh placement/watch_quarantined.py operator/drain-gpu.sh \
	 vmm/vfhealth-claim.sh npd/vfhealth-npd-check.sh slurm/vfhealth-slurm-check.sh; do
	check "example $x, mode 755" mode_is "$docdir/examples/$x" 755
done
for x in systemd/vfhealth-quarantine.path systemd/vfhealth-quarantine.service \
	 prometheus/vfhealth.rules.yml prometheus/vfhealth-textfile.service prometheus/vfhealth-textfile.timer \
	 grafana/vfhealth-fleet.json npd/vfhealth-monitor.json; do
	check "example $x, mode 644" mode_is "$docdir/examples/$x" 644
done
check "the path unit's service runs the hook script from libexec" \
	grep -q "^ExecStart=$libexecdir/on-quarantine-change.sh " \
	"$docdir/examples/systemd/vfhealth-quarantine.service"
check "the textfile service runs the publisher from libexec" \
	grep -q "^ExecStart=$libexecdir/vfhealth-textfile.sh " \
	"$docdir/examples/prometheus/vfhealth-textfile.service"
# It must run with vfhealthd down, to publish the failed read, and never
# wait on a mount namespace's set-up over a dead FUSE mount.
check "the textfile service runs without vfhealthd (no Requisite=/BindsTo=/Requires=)" \
	eval "! grep -Eq '^(Requisite|BindsTo|Requires)=' '$docdir/examples/prometheus/vfhealth-textfile.service'"
check "the textfile service: no mount namespace" no_private_mounts "$docdir/examples/prometheus/vfhealth-textfile.service"
while IFS= read -r u; do
	check "$(basename -- "$u") runs nothing from $datadir/doc" no_exec_from_doc "$u"
done < <(find "$dest" -type f \( -name '*.service' -o -name '*.service.in' \))

# systemd-analyze verify, when this machine has it.  Units name installed
# paths that exist only under DESTDIR: verify copies whose absolute paths
# point into DESTDIR (the unit files themselves are what is checked).
if command -v systemd-analyze >/dev/null; then
	mkdir -p "$T/verify"
	for u in "$unit" "$agent_unit" "$docdir/examples/systemd/vfhealth-quarantine.path" \
		 "$docdir/examples/systemd/vfhealth-quarantine.service" \
		 "$docdir/examples/prometheus/vfhealth-textfile.service" \
		 "$docdir/examples/prometheus/vfhealth-textfile.timer"; do
		[[ -f $u ]] || continue
		sed -e "s|=\(-\?\)$prefix/|=\1$dest$prefix/|g" "$u" > "$T/verify/$(basename -- "$u")"
	done
	# The path unit and timer refer to their services by name: verify them
	# together.  verify exits 0 on unknown keys and bad values and only
	# prints them: any line it prints is a failure, except what this
	# machine lacks (a container without PID 1 systemd has no sysinit.target).
	out=$(cd "$T/verify" && SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no -- ./*.service ./*.path ./*.timer 2>&1) || true
	bad=$(grep -v -E -e 'Unit (sysinit|basic|shutdown|local-fs|multi-user|timers)\.target not found' \
		-e 'Failed to read .container of PID 1' -e 'PR_SET_MM' <<<"$out" || true)
	if [[ -n $bad ]]; then
		echo "FAIL systemd-analyze verify:" >&2
		echo "$bad" >&2
		errors=$((errors + 1))
	else
		echo "ok   systemd-analyze verify"
	fi
else
	echo "note: systemd-analyze not available, units not verified"
fi

((errors == 0)) || fail "$errors check(s) failed"
echo "install tree OK"
