#!/usr/bin/env bash
# confinement.sh - the confused deputy (docs/security.md).  A
# member of the writers' group, who cannot even enter a root-only
# directory, tries to point root's sentinel at a socket there: directly,
# as hvsock (CONNECT to a port of its choice), through a symlink inside the
# socket directory, by ".." traversal, and at /etc/shadow as control=.  Each
# write gets EACCES, leaves the claim as it was, and the log names the
# writer.  Then the sentinel must never connect to that socket (a witness
# listening there counts connections: 0) even when a socket inside the
# directory is swapped for a symlink to it after the claim, or when a claim
# stored under wider directories is served under narrower ones (skipped and
# counted).  The witness itself works: our own connection is counted.
set -euo pipefail
# shellcheck source=../crash/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../crash/lib.sh"
adversary_bin=${ADVERSARY:?ADVERSARY must name the adversary (set by meson)}
: "${VFHEALTH_AGENT:?}"
require_fuse
require_cmd setpriv:util-linux
gid=$(getent group nogroup | cut -d: -f3) || skip "no group nogroup"

vmm=$T/vmm secret=$T/root-only
mkdir -m 0755 "$vmm"
mkdir -m 0700 "$secret"
target=$secret/witness-0.sock

# adversary DIR NAME MODE:COUNT...: listeners in DIR until the test ends.
adversary() {
	local dir=$1 name=$2
	shift 2
	mkfifo "$T/$name.in"
	exec {fd}<>"$T/$name.in"
	background "$adversary_bin" "$dir" "$@" <"$T/$name.in" >"$T/$name.out" 2>&1
	wait_for 30 "$name to listen" grep -qx ready "$T/$name.out"
}
adversary "$secret" witness witness:1
adversary "$vmm" agents ok:2
connections() { grep -c '^accepted' "$T/witness.out" || true; }
member() { setpriv --reuid 65534 --regid "$gid" --clear-groups "$@"; }
metric() { vf_read "$MNT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
metric_ge() { local v; v=$(metric "$1"); ((${v:-0} >= $2)); }

SOCKET_DIRS=("$vmm")
start_daemon --group nogroup --poll-interval 0.05 --poll-timeout 0.5 --reconcile-interval 0.1
member test ! -r "$secret" || fail "the member can read the root-only directory"

# ---- hostile writes by a group member: EACCES, nothing changed, writer named
vf=0000:41:00.4
member mkdir "$MNT/$vf"
[[ $(member "$VFIO" create "$MNT/$vf/assignments/vm-1") == ok ]] || fail "the member cannot claim"
claim=$MNT/$vf/assignments/vm-1
before=$(vf_read "$claim")
ln -s "$secret" "$vmm/link"
for bad in "agent=unix:$target" "agent=hvsock:$target:77" "control=/etc/shadow" \
	"control=$target" "agent=unix:$vmm/link/witness-0.sock" \
	"agent=hvsock:$vmm/link/witness-0.sock:22" "control=$vmm/link/witness-0.sock" \
	"agent=unix:$vmm/../root-only/witness-0.sock" "control=$vmm/../root-only/x" \
	"agent=vsock:3"$'\n'"control=$vmm/link"; do
	got=$(member "$VFIO" write "$claim" "$bad")
	[[ $got == EACCES ]] || fail "the member wrote '$bad': $got, want EACCES"
	[[ $(vf_read "$claim") == "$before" ]] || fail "'$bad' changed the claim"
done
grep -q "refused (outside the socket directories or through a symlink) for uid 65534 pid [0-9]" \
	"$DAEMON_LOG" || fail "no refusal naming the writer (uid 65534) in the log"
echo "ok   10 hostile writes by a group member: EACCES, claim unchanged, writer logged"

# ---- the sentinel: a socket swapped for a symlink after the claim
got=$(member "$VFIO" write "$claim" "agent=unix:$vmm/ok-0.sock"$'\n'"control=$vmm/control.sock"$'\n')
[[ $got == ok ]] || fail "a claim inside the socket directory: $got"
wait_for 20 "the sentinel to reach the agent inside" metric_ge 'vfhealth_sentinel_checks_total{result="ok"}' 1
# hvsock, named before anything is there (accepted), then made a symlink.
vf2=0000:41:00.5
mkdir "$MNT/$vf2"
[[ $(member "$VFIO" create "$MNT/$vf2/assignments/vm-2") == ok ]] || fail "second claim"
got=$(member "$VFIO" write "$MNT/$vf2/assignments/vm-2" \
	"agent=hvsock:$vmm/later.sock:77"$'\n'"control=$vmm/control.sock"$'\n')
[[ $got == ok ]] || fail "a claim naming a socket still to come: $got"
ln -s "$target" "$vmm/later.sock"
rm "$vmm/ok-0.sock"
ln -s "$target" "$vmm/ok-0.sock"
skipped=$(metric vfhealth_sentinel_claims_unconfined_total)
wait_for 20 "the sentinel to skip both claims in 10 polls" \
	metric_ge vfhealth_sentinel_claims_unconfined_total $((skipped + 20))
[[ $(connections) == 0 ]] || fail "the sentinel connected to the root-only socket through a symlink"
[[ -f $claim && -f $MNT/$vf2/assignments/vm-2 ]] || fail "a skipped claim was released"
echo "ok   sockets swapped for symlinks after the claim: skipped, never connected"
stop_daemon

# ---- a claim stored under wider directories, served under narrower ones
vf3=0000:41:00.6
SOCKET_DIRS=("$T")
start_daemon --no-sentinel
mkdir "$MNT/$vf3"
[[ $(vfio create "$MNT/$vf3/assignments/vm-3") == ok ]] || fail "third claim"
[[ $(vfio write "$MNT/$vf3/assignments/vm-3" "agent=unix:$target"$'\n'"control=$secret/control.sock"$'\n') == ok ]] ||
	fail "a claim under the wider directory"
stop_daemon
SOCKET_DIRS=("$vmm")
start_daemon --poll-interval 0.05 --poll-timeout 0.5 --reconcile-interval 0.1
wait_for 20 "the sentinel to skip the stored claim" metric_ge vfhealth_sentinel_claims_unconfined_total 10
wait_for 20 "10 polls" metric_ge vfhealth_sentinel_polls_total 10
[[ $(connections) == 0 ]] || fail "the sentinel connected outside its socket directories"
[[ -f $MNT/$vf3/assignments/vm-3 ]] || fail "reconcile released a claim it may not judge"
echo "ok   a stored claim outside the directories: skipped and counted, never connected"

# The witness counts: our own query reaches it.
"$VFHEALTH_AGENT" --query "unix:$target" --timeout 2 >/dev/null 2>&1 || true
wait_for 10 "the witness to count our connection" test "$(connections)" == 1
stop_daemon
echo PASS
