#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# boot.sh - vfhealth under a real systemd: a Debian 12 root file system with
# systemd 252 (rootfs.sh: built once with mmdebstrap, kept as a tar), the
# packages installed into it with dpkg, booted with systemd-nspawn (systemd
# as PID 1, journald, cgroup v2); every check runs inside it as an operator
# would (nsenter into the container's PID 1):
#   - install: the vfhealth group (sysusers), /run/vfhealth and /var/lib/vfhealth
#     (tmpfiles), nothing enabled or started; an upgrade over itself keeps a
#     changed conffile;
#   - systemctl enable --now vfhealthd: active after READY=1, Status= the
#     store's; the mount seen from another unit (a mount namespace of its
#     own, another user) and from a login shell;
#   - the runbook's journalctl commands, as printed, find the records with
#     their fields (VF=, EVENT=, INSTANCE=, WRITER_UID=);
#   - SIGHUP does not stop it (and `systemctl reload` is not a job it has);
#     restart, stop, SIGKILL and an unmount from outside: the state stays,
#     Restart=on-failure brings it back, the system stays "running";
#   - a recovery cycle: drained, the program run from the unit (a stand-in
#     on a fake sysfs), the GPU serving again and its VF's quarantine cleared;
#   - systemd-analyze security: every unit shipped (and the example units)
#     at most 5.0;
#   - the guest agent's unit runs and the sentinel gets its answer;
#   - the quarantine path unit, enabled as its header says, runs the hooks,
#     survives the mount going without leaving the system degraded, and
#     through several reboots: no ordering cycle, vfhealthd and the path unit
#     up at every boot, every shutdown clean (vfhealthd unmounts itself, exit
#     0); systemd-analyze verify default.target prints nothing;
#   - purge: nothing of vfhealth left in the root file system.
# Each check prints its name.  Skips (77) where nspawn cannot run: not root,
# no systemd-nspawn, mmdebstrap or /dev/fuse, or a kernel that refuses it.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"

[[ $(id -u) == 0 ]] || skip "needs root (systemd-nspawn boots a container)"
for tool in systemd-nspawn nsenter script; do
	command -v "$tool" >/dev/null || skip "$tool not installed (./dev.sh test installs it)"
done
[[ -c /dev/fuse ]] || skip "no /dev/fuse to give the container"

rc=0
tar=$("$(dirname -- "$0")/rootfs.sh") || rc=$?
((rc != 77)) || skip "mmdebstrap is not installed: no root file system to boot"
((rc == 0)) || fail "rootfs.sh could not build the root file system"
if ! compgen -G "$deb_dir/vfhealth_*.deb" >/dev/null; then
	require_cmd dpkg-buildpackage
	build_debs
fi

root=$T/root
mkdir "$root"
tar -C "$root" -xf "$tar"
mkdir "$root/root/debs"
for p in vfhealth vfhealth-agent; do
	cp "$(compgen -G "$deb_dir/${p}_*.deb" | head -n1)" "$root/root/debs/$p.deb"
done

machine=vfhealth-test-$$
nspawn=(systemd-nspawn -q -D "$root" -M "$machine" --keep-unit --register=no
	--setenv=SYSTEMD_COLORS=0 --system-call-filter=bpf --bind=/dev/fuse --bind=/dev/kmsg --capability=CAP_SYSLOG)
# Without the unified hierarchy nspawn gives systemd cgroup v1 here, where
# DevicePolicy= is silently not enforced.
export SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1
out=$("${nspawn[@]}" /bin/true 2>&1) || skip "systemd-nspawn cannot run here: $out"

ct_script='' ct_pid1='' boots=0 shutdown_cursor=''
# in_ct COMMAND...: run COMMAND inside the container, in all its namespaces,
# with a clean environment.
in_ct() {
	nsenter -t "$ct_pid1" -a -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
		SYSTEMD_PAGER= SYSTEMD_COLORS=0 HOME=/root "$@"
}
find_pid1() {
	local n
	n=$(pgrep -P "$ct_script" -x systemd-nspawn) || return 1
	ct_pid1=$(pgrep -P "$n" -x systemd) || return 1
}
up() { # the boot is over (running, or degraded: checked after)
	local s
	s=$(in_ct systemctl is-system-running 2>/dev/null) || true
	[[ $s == running || $s == degraded ]]
}
# boot: start the container with its console (PID 1's messages) in
# console-N.log, which a failure shows; wait until the boot is over.
boot() {
	boots=$((boots + 1))
	DAEMON_LOG=$T/console-$boots.log
	script -qfec "exec ${nspawn[*]@Q} --console=read-only -b" "$DAEMON_LOG" </dev/null >/dev/null 2>&1 &
	ct_script=$!
	wait_for 30 "systemd-nspawn to start systemd" find_pid1
	wait_for 60 "boot $boots to finish" up
}
# poweroff: a clean shutdown; nspawn exits 0 once PID 1 has powered off.
poweroff() {
	local rc=0
	shutdown_cursor=$(in_ct journalctl -q -n 0 --show-cursor | sed -n 's/^-- cursor: //p')
	in_ct systemctl poweroff || true
	wait_for 60 "the container to power off" process_gone "$ct_script"
	wait "$ct_script" || rc=$?
	ct_script=
	check "shutdown $boots: systemd-nspawn exit status 0" test "$rc" = 0
}
stop_container() {
	[[ -n $ct_script ]] || return 0
	pkill -TERM -P "$ct_script" -x systemd-nspawn 2>/dev/null # nspawn powers the container off
	wait_until 20 process_gone "$ct_script" || kill -KILL "$ct_script" 2>/dev/null
	pkill -KILL -P "$ct_script" -x systemd-nspawn 2>/dev/null
}
on_exit stop_container

prop() { in_ct systemctl show -p "$2" --value "$1"; } # UNIT PROPERTY
is() { [[ $("$@" 2>/dev/null) == "${EXPECT:?}" ]]; }
# (No `grep -q` at the end of a pipe: it may leave before journalctl ends,
# whose SIGPIPE then fails the pipe under pipefail.)
journal_has() { [[ -n $(in_ct journalctl -q --no-pager "$@" -o cat) ]]; }
log_has() { in_ct journalctl -q --no-pager -u "$1" -o cat | grep -F -- "$2" >/dev/null; }
serves() { in_ct cat /run/vfhealth/threshold >/dev/null 2>&1; }
mount_serves() { in_ct grep -qx 0000:41:00.4 /run/vfhealth/quarantined 2>/dev/null; }
system_running() { [[ $(in_ct systemctl is-system-running 2>/dev/null) == running ]]; }

# files NAME: every file of the root file system and /run, but what the
# system itself changes (logs, dpkg's and systemd's own state, temp dirs).
files() {
	in_ct find / /run -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /tmp \
		-o -path /var/tmp -o -path /var/log -o -path /var/lib/dpkg -o -path /var/cache/debconf \
		-o -path /var/lib/systemd -o -path /run/systemd -o -path /run/user -o -path /run/log \
		-o -path /run/credentials -o -path /root -o -path /var/lib/private -o -path /var/cache/private \
		-o -path /var/cache/ldconfig -o -path /run/lock -o -path /run/dbus -o -path '/etc/*-' \
		-o -path /etc/.pwd.lock -o -path /run/utmp -o -path /run/mount -o -path /run/agetty.reload \) \
		-prune -o -print |
		sort >"$T/files.$1"
}

# ---- boot 1: install ---------------------------------------------------------
boot
check "boot 1: the system is running" system_running
files before
in_ct dpkg -i /root/debs/vfhealth.deb /root/debs/vfhealth-agent.deb >"$T/dpkg-install.log" 2>&1 ||
	{ cat "$T/dpkg-install.log" >&2; fail "dpkg -i failed"; }
echo "ok   dpkg -i vfhealth vfhealth-agent"
group_exists() { in_ct getent group vfhealth >/dev/null; }
check "sysusers: the group vfhealth exists" group_exists
EXPECT="755 root:root" check "tmpfiles: /run/vfhealth 755 root" is in_ct stat -c '%a %U:%G' /run/vfhealth
EXPECT="700 root:root" check "tmpfiles: /var/lib/vfhealth 700 root" is in_ct stat -c '%a %U:%G' /var/lib/vfhealth
for u in vfhealthd vfhealth-agent; do
	EXPECT=disabled check "the install did not enable $u" is in_ct systemctl is-enabled "$u"
	EXPECT=inactive check "the install did not start $u" is prop "$u" ActiveState
done
# The options file as docs/overview.md ("Installing") sets it, then an
# upgrade over the same version: the changed conffile stays.
in_ct sh -c 'echo "VFHEALTHD_OPTIONS=\"--group vfhealth\"" > /etc/default/vfhealthd'
in_ct dpkg -i /root/debs/vfhealth.deb >"$T/dpkg-upgrade.log" 2>&1 ||
	{ cat "$T/dpkg-upgrade.log" >&2; fail "dpkg -i over the installed package failed"; }
EXPECT='VFHEALTHD_OPTIONS="--group vfhealth"' check "an upgrade over itself keeps the changed /etc/default/vfhealthd" \
	is in_ct cat /etc/default/vfhealthd

# ---- the operator's story ------------------------------------------------------
in_ct systemctl enable --now vfhealthd.service 2>/dev/null
EXPECT=active check "systemctl enable --now vfhealthd: active (Type=notify: after READY=1)" is prop vfhealthd ActiveState
EXPECT=notify check "vfhealthd.service is Type=notify" is prop vfhealthd Type
EXPECT="store available" check "Status= is the store's" is prop vfhealthd StatusText
in_ct systemctl status vfhealthd --no-pager --lines=5 | sed 's/^/  | /' || true
pid=$(prop vfhealthd MainPID)

EXPECT=2 check "the mount seen from another unit (own mount namespace, a dynamic user)" \
	is in_ct systemd-run --quiet --wait --pipe -p ProtectSystem=strict -p PrivateTmp=yes \
	-p DynamicUser=yes cat /run/vfhealth/threshold
EXPECT=2 check "the mount seen from a login shell of another user" \
	is in_ct su -l nobody -s /bin/bash -c 'cat /run/vfhealth/threshold'
EXPECT=vfhealth check "the mount's files belong to the group --group names" \
	is in_ct stat -c %G /run/vfhealth/threshold

# One VF's story, by its writers, then the runbook's queries as printed.
vf=0000:41:00.4
in_ct mkdir "/run/vfhealth/$vf"
report() { # INSTANCE
	in_ct sh -c "printf 'failed %s - NVRM: GPU 0000:00:05.0: RmInitAdapter failed! (0x22:0x65:884)\n' $1 > /run/vfhealth/$vf/report"
}
report vm-a
report vm-b
EXPECT=$vf check "two failed assignments quarantine $vf" is in_ct cat /run/vfhealth/quarantined
mapfile -t queries < <(sed -n '/^## Log lines/,/^## /p' "$source_root/docs/runbook.md" |
	grep -E '^journalctl -u vfhealthd' | sed 's/ *#.*//')
((${#queries[@]} >= 4)) || fail "docs/runbook.md's \"Log lines\" has ${#queries[@]} journalctl commands"
for q in "${queries[@]}"; do
	read -r -a words <<<"$q"
	check "runbook: '$q' finds records" journal_has "${words[@]:1}"
done
echo "  journalctl -u vfhealthd VF=$vf:"
in_ct journalctl -q --no-pager -u vfhealthd "VF=$vf" | sed 's/^/  | /'
fields() { in_ct journalctl -q --no-pager -u vfhealthd "$@" -o export; }
has_field() { fields "EVENT=$1" | grep -x -- "$2" >/dev/null; } # EVENT FIELD=VALUE
check "the quarantine's record has EVENT=quarantined and VF=$vf" has_field quarantined "VF=$vf"
check "a failure's record names its instance (INSTANCE=vm-a)" has_field failure-recorded "INSTANCE=vm-a"
check "a failure's record names its writer (WRITER_UID=0)" has_field failure-recorded "WRITER_UID=0"

# SIGHUP and reload.
in_ct systemctl kill -s HUP --kill-who=main vfhealthd
hup_handled() { log_has vfhealthd "signal HUP: nothing to reload" || [[ $(prop vfhealthd ActiveState) != active ]]; }
wait_for 20 "vfhealthd to log the SIGHUP or to stop" hup_handled
state_pid() { echo "$(prop vfhealthd ActiveState) $(prop vfhealthd MainPID)"; }
EXPECT="active $pid" check "systemctl kill -s HUP: vfhealthd goes on (same pid)" is state_pid
# (Had it stopped, the checks below still run on a started one.)
in_ct systemctl start vfhealthd
rc=0
reload_out=$(in_ct systemctl reload vfhealthd 2>&1) || rc=$?
check "systemctl reload vfhealthd: not a job it has, as vfhealthd(8) says" \
	test "$rc" != 0 -a -n "$(grep -F 'not applicable' <<<"$reload_out")"

# Restart, stop, SIGKILL, unmount from outside.
in_ct systemctl restart vfhealthd
new_pid() { local p; p=$(prop vfhealthd MainPID); [[ $p != 0 && $p != "$pid" ]]; }
check "restart: a new pid" new_pid
check "restart: $vf still quarantined" mount_serves
in_ct systemctl stop vfhealthd
not_mounted() { ! in_ct mountpoint -q /run/vfhealth; }
check "stop: the mount is gone" not_mounted
EXPECT=0 check "stop: vfhealthd exited 0" is prop vfhealthd ExecMainStatus
check "stop: vfhealthd unmounted itself" log_has vfhealthd "unmounted /run/vfhealth"
in_ct systemctl start vfhealthd
restarts() { prop vfhealthd NRestarts; }
n=$(restarts)
restarted() { [[ $(restarts) -gt $n && $(prop vfhealthd ActiveState) == active ]] && mount_serves; }
in_ct systemctl kill -s KILL --kill-who=main vfhealthd
wait_for 60 "Restart=on-failure after SIGKILL" restarted
echo "ok   SIGKILL: restarted, the stale mount recovered, $vf still quarantined"
n=$(restarts)
in_ct umount /run/vfhealth
wait_for 60 "Restart=on-failure after an unmount from outside" restarted
check "an unmount from outside is logged, exit 1" log_has vfhealthd "unmounted from outside: exiting with status 1"
echo "ok   unmount from outside: restarted, $vf still quarantined"
check "after all that the system is running (nothing failed)" system_running

# ---- the guest agent's unit, and the sentinel asking it ----------------------
# The agent listens on a unix socket (as behind hybrid vsock) in a directory
# the sentinel may reach: vsock's loopback (CID 1) is missing from some host
# kernels.  Its unit keeps every sandboxing option; the drop-in only gives it
# the directory to create its socket in (ProtectSystem=strict).
in_ct mkdir -p /etc/systemd/system/vfhealth-agent.service.d
in_ct sh -c 'printf "[Service]\nRuntimeDirectory=vfhealth-vmm\n" > /etc/systemd/system/vfhealth-agent.service.d/test-socket.conf'
in_ct sh -c "echo 'VFHEALTH_AGENT_OPTIONS=\"--listen unix:/run/vfhealth-vmm/agent.sock\"' > /etc/default/vfhealth-agent"
in_ct systemctl daemon-reload
in_ct systemctl start vfhealth-agent
EXPECT=active check "vfhealth-agent.service runs" is prop vfhealth-agent ActiveState
agent_listens() { in_ct test -S /run/vfhealth-vmm/agent.sock; }
wait_for 30 "the agent to listen" agent_listens
agent_vf=0000:41:00.6
in_ct mkdir "/run/vfhealth/$agent_vf"
# The VMM: a process of its own (a transient unit), which the claim names.
in_ct systemd-run --quiet --unit=vfhealth-test-vmm sleep infinity
vmm=$(prop vfhealth-test-vmm MainPID)
in_ct sh -c ": > /run/vfhealth/$agent_vf/assignments/vm-g &&
	printf 'agent=unix:/run/vfhealth-vmm/agent.sock\npid=$vmm\n' > /run/vfhealth/$agent_vf/assignments/vm-g"
# shellcheck disable=SC2016 # awk's own fields
counter() { in_ct awk -v want="vfhealth_sentinel_checks_total{result=\"$1\"}" '$1 == want { print $2 }' /run/vfhealth/metrics; }
agent_answered() { local n; n=$(counter unknown); [[ -n $n && $n != 0 ]]; }
wait_for 60 "the sentinel to get the agent's answer (unknown: no GPU here)" agent_answered
echo "ok   the sentinel polled the agent unit's socket (it answered unknown: no GPU here)"
# The sentinel judges a VMM of another uid under the unit's capabilities
# (no CAP_SYS_PTRACE): its claim is counted watch="polled", not uncertain.
in_ct mkdir "/run/vfhealth/0000:41:00.7"
in_ct systemd-run --quiet --unit=vfhealth-test-vmm-nobody -p User=nobody sleep infinity
vmm_nobody=$(prop vfhealth-test-vmm-nobody MainPID)
in_ct sh -c ": > /run/vfhealth/0000:41:00.7/assignments/vm-n &&
	printf 'agent=unix:/run/vfhealth-vmm/agent.sock\npid=$vmm_nobody\n' > /run/vfhealth/0000:41:00.7/assignments/vm-n"
# shellcheck disable=SC2016 # awk's own fields
series() { in_ct awk -v want="$1" '$1 == want { print $2 }' /run/vfhealth/metrics; }
# both live claims (vm-g's VMM runs as root, vm-n's as nobody) polled, none uncertain
polled() {
	[[ $(series 'vfhealth_sentinel_claims{watch="polled"}') == 2 &&
		$(series 'vfhealth_sentinel_claims{watch="uncertain"}') == 0 ]]
}
wait_until 30 polled || {
	in_ct grep '^vfhealth_sentinel_claims' /run/vfhealth/metrics >&2 || :
	in_ct journalctl -q -n 20 -u vfhealthd >&2 || :
	fail "timed out waiting for: both claims polled (vfhealth_sentinel_claims{watch=\"polled\"} 2), none uncertain"
}
echo "ok   the sentinel polls a VMM of another uid (watch=polled)"
in_ct systemctl stop vfhealth-test-vmm-nobody
in_ct systemctl stop vfhealth-test-vmm vfhealth-agent
in_ct rm -r /etc/systemd/system/vfhealth-agent.service.d
in_ct systemctl daemon-reload

# ---- a recovery cycle, run by vfhealthd inside its unit's sandbox -------------
# A fake sysfs (an NVIDIA parent GPU with two VFs) and a stand-in for
# sriov-cycle.sh that takes the VFs away and brings them back there: the
# program runs as vfhealthd runs it (from the unit: its capabilities, its
# system call filter, a PID namespace of its own).
pf=0000:42:00.0
fake=/srv/vfhealth-test-sys/bus/pci/devices
in_ct sh -c "mkdir -p $fake/$pf $fake/0000:42:00.4 $fake/0000:42:00.5 &&
	echo 0x10de > $fake/$pf/vendor && echo 16 > $fake/$pf/sriov_totalvfs &&
	echo 2 > $fake/$pf/sriov_numvfs &&
	ln -s ../0000:42:00.4 $fake/$pf/virtfn0 && ln -s ../0000:42:00.5 $fake/$pf/virtfn1 &&
	ln -s ../$pf $fake/0000:42:00.4/physfn && ln -s ../$pf $fake/0000:42:00.5/physfn"
in_ct tee /usr/local/sbin/vfhealth-test-cycle >/dev/null <<'PROGRAM'
#!/bin/sh
# A stand-in for sriov-cycle.sh on a fake sysfs: the VFs go, then come back.
set -e
d=$VFHEALTH_SYSFS_ROOT/bus/pci/devices/$1
echo "test-cycle: $1: cycling SR-IOV as pid $$"
rm -f "$d"/virtfn*
echo 0 > "$d/sriov_numvfs"
ln -s ../0000:42:00.4 "$d/virtfn0"
ln -s ../0000:42:00.5 "$d/virtfn1"
echo 2 > "$d/sriov_numvfs"
echo "test-cycle: $1: 2 VFs back"
PROGRAM
in_ct chmod 755 /usr/local/sbin/vfhealth-test-cycle
in_ct tee /etc/default/vfhealthd >/dev/null <<'OPTIONS'
VFHEALTHD_OPTIONS="--group vfhealth --sysfs-root /srv/vfhealth-test-sys --recover-program /usr/local/sbin/vfhealth-test-cycle"
OPTIONS
in_ct systemctl restart vfhealthd
# vfhealthd registers the fake GPU's VFs from its sysfs before it is ready
EXPECT=$pf check "vfhealthd registered 0000:42:00.4 from sysfs, its parent $pf" \
	is in_ct cat /run/vfhealth/0000:42:00.4/parent
EXPECT=$pf check "vfhealthd registered 0000:42:00.5 from sysfs, its parent $pf" \
	is in_ct cat /run/vfhealth/0000:42:00.5/parent
check "the registration is logged" log_has vfhealthd "GPU $pf: 2 VFs registered from sysfs"
vf=0000:42:00.4 report vm-c
vf=0000:42:00.4 report vm-d
EXPECT=1 check "0000:42:00.4 quarantined before the cycle" is in_ct cat /run/vfhealth/0000:42:00.4/quarantined
gpu=/run/vfhealth/gpus/$pf
in_ct sh -c "echo 1 > $gpu/drain"
gpu_state() { [[ $(in_ct cat "$gpu/state" 2>/dev/null) == "$1" ]]; }
wait_for 30 "$pf to be drained" gpu_state drained
in_ct sh -c "echo cycle > $gpu/recover"
wait_for 60 "$pf to serve again after its cycle" gpu_state serving
echo "ok   a recovery cycle of $pf ran from the unit; the GPU serves again"
EXPECT=0 check "the cycle cleared 0000:42:00.4's quarantine" is in_ct cat /run/vfhealth/0000:42:00.4/quarantined
check "vfhealthd logged the program's lines" log_has vfhealthd "test-cycle: $pf: 2 VFs back"
echo "  journalctl -u vfhealthd VF=0000:42:00.4:"
in_ct journalctl -q --no-pager -u vfhealthd VF=0000:42:00.4 | sed 's/^/  | /'
echo "  journalctl -u vfhealthd, GPU $pf:"
in_ct journalctl -q --no-pager -u vfhealthd -o cat | grep -F "GPU $pf" | sed 's/^/  | /'

# ---- systemd-analyze security ---------------------------------------------------
ex=/usr/share/doc/vfhealth/examples
in_ct cp "$ex/systemd/vfhealth-quarantine.path" "$ex/systemd/vfhealth-quarantine.service" \
	"$ex/prometheus/vfhealth-textfile.service" "$ex/prometheus/vfhealth-textfile.timer" /etc/systemd/system/
in_ct systemctl daemon-reload
exposure_at_most_5() { # UNIT
	local line
	line=$(in_ct systemd-analyze security --no-pager "$1" | grep 'Overall exposure level')
	echo "  $line"
	awk -v v="$(grep -oE '[0-9]+\.[0-9]+' <<<"$line" | head -n1)" 'BEGIN { exit !(v != "" && v <= 5.0) }'
}
for u in vfhealthd.service vfhealth-agent.service vfhealth-quarantine.service vfhealth-textfile.service; do
	check "systemd-analyze security $u: at most 5.0" exposure_at_most_5 "$u"
done
in_ct rm /etc/systemd/system/vfhealth-textfile.service /etc/systemd/system/vfhealth-textfile.timer

# ---- the quarantine path unit, as its header says ------------------------------
in_ct systemctl enable --now vfhealth-quarantine.path 2>/dev/null
in_ct mkdir -p /etc/vfhealth/quarantine.d
# shellcheck disable=SC2016 # the hook's arguments
in_ct sh -c 'printf "#!/bin/sh\necho \"\$1 \$2\" >> /var/lib/vfhealth-hook-calls\n" > /etc/vfhealth/quarantine.d/10-record &&
	chmod 755 /etc/vfhealth/quarantine.d/10-record'
hook_called() { in_ct grep -qx "$1" /var/lib/vfhealth-hook-calls 2>/dev/null; }
in_ct sh -c "echo 1 > /run/vfhealth/0000:41:00.6/quarantined"
wait_for 30 "the hook to hear 'quarantined 0000:41:00.6'" hook_called "quarantined 0000:41:00.6"
# The first run also reports what was quarantined before the unit ran.
check "the path unit ran the hooks" hook_called "quarantined $vf"
n=$(restarts)
in_ct umount /run/vfhealth
wait_for 60 "vfhealthd back after an unmount from outside" restarted
EXPECT=active check "the path unit is back with vfhealthd" is prop vfhealth-quarantine.path ActiveState
check "the mount going left the system running, not degraded" system_running
in_ct sh -c "echo 0 > /run/vfhealth/0000:41:00.6/quarantined"
wait_for 30 "the hook to hear 'cleared 0000:41:00.6' after the restart" hook_called "cleared 0000:41:00.6"
echo "ok   the path unit runs the hooks after vfhealthd's restart"

# ---- reboots ---------------------------------------------------------------------
# PID 1 finds the boot's cycles before journald runs: its console has them.
no_cycle() {
	! { cat "$DAEMON_LOG"; in_ct journalctl -b -q --no-pager _PID=1 -o cat; } | grep -i 'ordering cycle' >&2
}
# The records of the last shutdown: those after the cursor poweroff noted.
shutdown_log() { in_ct journalctl -q --no-pager --after-cursor="$shutdown_cursor" "$@" -o cat; }
unmounted_itself() { shutdown_log -u vfhealthd | grep -x 'unmounted /run/vfhealth' >/dev/null; }
nothing_failed_at_shutdown() {
	! shutdown_log -u vfhealthd -u 'vfhealth-quarantine.*' | grep -E 'Failed with result|unmounted from outside' >&2
}
verify_quiet() { [[ -z $(in_ct systemd-analyze verify --man=no default.target 2>&1) ]]; }
check "systemd-analyze verify default.target prints nothing" verify_quiet
for _ in 1 2 3; do
	poweroff
	boot
	b=$boots
	check "boot $b: no ordering cycle in PID 1's log" no_cycle
	EXPECT=active check "boot $b: vfhealthd active" is prop vfhealthd ActiveState
	EXPECT=active check "boot $b: vfhealth-quarantine.path active" is prop vfhealth-quarantine.path ActiveState
	check "boot $b: the system is running" system_running
	check "boot $b: $vf still quarantined" mount_serves
	check "shutdown $((b - 1)): vfhealthd unmounted itself" unmounted_itself
	check "shutdown $((b - 1)): nothing of vfhealth failed" nothing_failed_at_shutdown
done

# ---- purge -----------------------------------------------------------------------
# The operator undoes what the operator did, then purges.
in_ct systemctl disable --now vfhealth-quarantine.path 2>/dev/null
in_ct rm -r /etc/systemd/system/vfhealth-quarantine.path /etc/systemd/system/vfhealth-quarantine.service \
	/etc/vfhealth /var/lib/vfhealth-hook-calls /root/debs /srv/vfhealth-test-sys \
	/usr/local/sbin/vfhealth-test-cycle
in_ct dpkg --purge vfhealth vfhealth-agent >"$T/dpkg-purge.log" 2>&1 ||
	{ cat "$T/dpkg-purge.log" >&2; fail "dpkg --purge failed"; }
echo "ok   dpkg --purge vfhealth vfhealth-agent"
files after
stray=$(comm -13 "$T/files.before" "$T/files.after")
check "purge leaves no file that was not there before the install" test -z "$stray"
[[ -z $stray ]] || echo "$stray" | while read -r f; do echo "  stray: $f"; done >&2
left=$(in_ct find / /run -xdev -name '*vfhealth*' -not -path '/proc/*' 2>/dev/null || true)
check "purge leaves nothing named vfhealth" test -z "$left"
[[ -z $left ]] || echo "$left" | while read -r f; do echo "  left: $f"; done >&2
check "the vfhealth group stays (Debian keeps system groups)" group_exists
poweroff
finish_checks
echo "systemd OK"
