#!/usr/bin/env bash
# install.sh - the README's install recipe, run as printed into a temporary
# DESTDIR (its `meson setup` options on a fresh build directory, the
# installed programs built, `meson install --destdir`), then the tree:
# every file under the Debian path it belongs in (/usr/sbin,
# /usr/lib/systemd/system, /usr/lib/tmpfiles.d, /usr/lib/sysusers.d,
# /etc/default, /usr/libexec/vfhealth, /usr/share/man,
# /usr/share/doc/vfhealth) and nothing under /lib or /usr/local; every
# binary in sbindir and executable, the man pages, the units naming the
# installed binaries and hardened (`systemd-analyze security --offline`
# exposure at most 5.0 for every installed service, examples included, and
# 3.0 for vfhealth-agent.service; no mount namespace for the daemon), the
# tmpfiles.d entry, the sysusers.d entry creating the group the docs pass to
# --group (applied with systemd-sysusers --root), both /etc/default files,
# every script the runbook runs installed executable outside /usr/share/doc,
# the scripts units run in libexecdir, the examples with their modes; and
# `systemd-analyze verify` on the units when it is available.  The build
# under test (any prefix) installs nothing outside its prefix.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"

# ---- the README's recipe -------------------------------------------------------

# The recipe is the README's `meson setup --prefix=...` line; docs/overview.md
# ("Installing") must show the same one.
recipe=$(grep -E '^meson setup --prefix=' "$source_root/README.md" || true)
[[ $(wc -l <<<"$recipe") == 1 && -n $recipe ]] || fail "README.md has no single 'meson setup --prefix=' line: '$recipe'"
grep -qxF -- "$recipe" "$source_root/docs/overview.md" ||
	fail "docs/overview.md does not show the README's recipe: $recipe"
read -r -a words <<<"$recipe"
# meson setup OPTIONS... BUILDDIR: the options, on a build directory of ours.
opts=("${words[@]:2:${#words[@]}-3}")
for want in --prefix=/usr --sysconfdir=/etc --localstatedir=/var -Db_sanitize=none -Dtests=false; do
	printf '%s\n' "${opts[@]}" | grep -qxF -- "$want" || fail "the README's recipe lacks $want: $recipe"
done
rel=$T/build-release
meson setup "${opts[@]}" "$rel" "$source_root" >"$T/setup.log" 2>&1 ||
	{ cat "$T/setup.log" >&2; fail "meson setup ${opts[*]} failed"; }
# Only what is installed is built: the tests are the build under test's.
mapfile -t installed_targets < <(meson introspect "$rel" --targets | python3 -c '
import json, os, sys
for t in json.load(sys.stdin):
    if t["installed"]:
        for f in t["filename"]:
            print(os.path.relpath(f, sys.argv[1]))' "$rel")
((${#installed_targets[@]} >= 3)) || fail "only ${#installed_targets[@]} installed targets"
ninja -C "$rel" "${installed_targets[@]}" >"$T/compile.log" 2>&1 ||
	{ tail -n 40 "$T/compile.log" >&2; fail "building ${installed_targets[*]} failed"; }
dest=$T/dest
meson install -C "$rel" --destdir "$dest" --no-rebuild --quiet >"$T/install.log" 2>&1 ||
	{ cat "$T/install.log" >&2; fail "meson install failed"; }

# Where Debian puts things; the recipe must land exactly there.
prefix=/usr
sbindir=/usr/sbin
mandir=/usr/share/man
datadir=/usr/share
sysconfdir=/etc
libexecdir=/usr/libexec/vfhealth
unitdir=/usr/lib/systemd/system
tmpfilesdir=/usr/lib/tmpfiles.d
sysusersdir=/usr/lib/sysusers.d

errors=0
check() { # DESCRIPTION COMMAND...
	local what=$1; shift
	if "$@"; then pass "$what"; else not_ok "$what"; errors=$((errors + 1)); fi
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
tmpfiles_apply() { # ROOT CONF: as the README runs it, by name, on ROOT
	systemd-tmpfiles --root="$1" --create "$2" &&
		[[ -d $1/run/vfhealth && -d $1/var/lib/vfhealth ]] &&
		[[ $(stat -c %a "$1/var/lib/vfhealth") == 700 ]]
}

# Every installed file under one of the directories it belongs in: nothing
# in /lib (systemd.pc's unit directory on Debian 12, whatever the prefix),
# nothing under /usr/local.
in_layout() {
	local f rel bad=0
	while IFS= read -r f; do
		rel=${f#"$dest"}
		case $rel in
		"$sbindir"/*|"$unitdir"/*|"$tmpfilesdir"/*|"$sysusersdir"/*|"$sysconfdir"/default/*|\
		"$libexecdir"/*|"$mandir"/*|"$datadir"/doc/vfhealth/*) ;;
		*) echo "     outside the layout: $rel" >&2; bad=1 ;;
		esac
	done < <(find "$dest" ! -type d)
	return "$bad"
}
check "every file in a Debian directory (none in /lib or /usr/local)" in_layout

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
# detach a live one another vfhealthd serves (docs/architecture.md, Shutdown).
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
	# Every service installed, the examples' included.
	services=0
	while IFS= read -r u; do
		services=$((services + 1))
		check "${u#"$dest"}: exposure at most 5.0" exposure_at_most "$u" 5.0
	done < <(find "$dest" -type f -name '*.service' | sort)
	check "the services are rated ($services)" test "$services" -ge 4
	check "vfhealth-agent.service: exposure at most 3.0" exposure_at_most "$agent_unit" 3.0
else
	echo "note: systemd-analyze security --offline not available; exposure not rated"
fi

# tmpfiles.d: the mountpoint and the state directory.
tmpfiles=$dest$tmpfilesdir/vfhealth.conf
check "tmpfiles.d/vfhealth.conf installed" test -f "$tmpfiles"
check "tmpfiles.d creates /run/vfhealth" grep -Eq '^d +/run/vfhealth +0755 ' "$tmpfiles"
check "tmpfiles.d creates /var/lib/vfhealth" grep -Eq '^d +/var/lib/vfhealth +0700 ' "$tmpfiles"
if command -v systemd-tmpfiles >/dev/null; then
	# Apply it to a scratch root: the entries must parse and create the dirs.
	check "systemd-tmpfiles --root creates both directories" \
		tmpfiles_apply "$dest" vfhealth.conf
fi

# sysusers.d: the group every document passes to --group exists once
# systemd-sysusers has run (here on the DESTDIR, as the README runs it).
sysusers=$dest$sysusersdir/vfhealth.conf
check "sysusers.d/vfhealth.conf installed" test -f "$sysusers"
mapfile -t groups < <(cd "$source_root" &&
	sed 's/\\-/-/g' docs/man/vfhealthd.8 docs/overview.md examples/systemd/vfhealthd.default |
	grep -oE -e '--group +[a-z_][a-z0-9_-]*' | awk '{ print $2 }' | sort -u)
check "the docs name a --group (${groups[*]})" test "${#groups[@]}" -ge 1
if command -v systemd-sysusers >/dev/null; then
	systemd-sysusers --root="$dest" vfhealth.conf >"$T/sysusers.log" 2>&1 || cat "$T/sysusers.log" >&2
	for g in "${groups[@]}"; do
		check "systemd-sysusers creates group $g" grep -q "^$g:x:[0-9]*:" "$dest/etc/group"
	done
else
	for g in "${groups[@]}"; do
		check "sysusers.d creates group $g" grep -Eq "^g +$g " "$sysusers"
	done
fi

# Every script the runbook runs: installed, executable, never only under
# /usr/share/doc (Debian Policy 12.3).
bq='`'
mapfile -t runbook_scripts < <(grep -oE "(^|[ $bq])/usr/[^ $bq]*\\.(sh|py)" "$source_root/docs/runbook.md" |
	sed "s/^[ $bq]//" | sort -u)
check "the runbook runs scripts (${runbook_scripts[*]})" test "${#runbook_scripts[@]}" -ge 1
for x in "${runbook_scripts[@]}"; do
	check "runbook's $x installed, mode 755" mode_is "$dest$x" 755
	check "runbook's $x not under $datadir/doc" eval "[[ '$x' != '$datadir/doc/'* ]]"
done

# Options files, one per unit, each setting the variable its unit expands.
check "default/vfhealthd installed" grep -q '^VFHEALTHD_OPTIONS=' "$dest$sysconfdir/default/vfhealthd"
check "default/vfhealth-agent installed" grep -q '^VFHEALTH_AGENT_OPTIONS=' "$dest$sysconfdir/default/vfhealth-agent"

# Scripts that units and other programs run (sriov-cycle.sh: vfhealthd's
# --recover-program), and that the runbook runs: in libexecdir, executable.
for x in on-quarantine-change.sh vfhealth-textfile.sh drain-gpu.sh vfhealth-npd-check.sh \
	 vfhealth-slurm-check.sh vfhealth-qemu-hook sriov-cycle.sh; do
	check "libexec $x, mode 755" mode_is "$dest$libexecdir/$x" 755
done

# The integrations: the libvirt hook reads the settings file this install
# puts in place and is never enabled (nothing under /etc/libvirt); the
# node-problem-detector config is JSON naming the installed check.
check "default/vfhealth-libvirt-hook installed" \
	grep -q '^#VFHEALTH_MOUNT=' "$dest$sysconfdir/default/vfhealth-libvirt-hook"
check "the libvirt hook reads $sysconfdir/default/vfhealth-libvirt-hook" \
	grep -qx "CONFIG = \"$sysconfdir/default/vfhealth-libvirt-hook\"" "$dest$libexecdir/vfhealth-qemu-hook"
check "default/vfhealth-slurm-check installed" \
	grep -q '^#VFHEALTH_MOUNT=' "$dest$sysconfdir/default/vfhealth-slurm-check"
check "the Slurm check reads $sysconfdir/default/vfhealth-slurm-check" \
	grep -qx "config=$sysconfdir/default/vfhealth-slurm-check" "$dest$libexecdir/vfhealth-slurm-check.sh"
check "no libvirt hook enabled" test -z "$(find "$dest" -path '*/libvirt/hooks*' 2>/dev/null)"
npd_path() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["rules"][0]["path"])' "$1"; }
check "the npd monitor names the installed check" \
	test "$(npd_path "$dest$datadir/doc/vfhealth/examples/npd/vfhealth-monitor.json")" == "$libexecdir/vfhealth-npd-check.sh"

# Documentation and examples.
docdir=$dest$datadir/doc/vfhealth
for d in overview.md interface.md runbook.md security.md limits.md; do
	check "doc $d" test -s "$docdir/$d"
done
for x in placement/watch-quarantined.sh placement/watch_quarantined.py \
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

# The build under test, whatever its prefix: nothing installed outside it.
under_prefix() {
	meson introspect "$build_root" --installed | python3 -c '
import json, sys
bad = [d for d in json.load(sys.stdin).values() if not d.startswith(sys.argv[1].rstrip("/") + "/")]
for d in bad:
    print("     outside the prefix:", d, file=sys.stderr)
sys.exit(1 if bad else 0)' "$1"
}
bt_prefix=$(meson introspect "$build_root" --buildoptions |
	python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"))')
check "the build under test installs under its prefix $bt_prefix" under_prefix "$bt_prefix"

((errors == 0)) || fail "$errors check(s) failed"
echo "install tree OK"
