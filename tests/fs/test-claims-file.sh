#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The top-level `claims` file (vfhealth(5)): exactly the live
# claims, one "VF INSTANCE" line each, sorted by VF -- the same set as every
# VF's assignments/ listed one by one -- after claims, refusals, releases and
# re-claims; readable by anyone, never writable; a change wakes its pollers
# and inotify watchers.  The sentinel's side (it polls what this file names
# and nothing else) is tests/sentinel/test-claims-file.sh.
source "$(dirname "$0")/lib.sh"
require_fuse
start_daemon

A=0000:41:00.4
B=0000:41:00.5
C=0000:03:00.1
mkdir "$MNT/$A" "$MNT/$B" "$MNT/$C"

# What listing every VF's assignments/ says, in the claims file's format.
walk() {
	local d id
	for d in "$MNT"/*/assignments; do
		for id in $(ls "$d"); do
			echo "${d#"$MNT/"} $id" | sed 's|/assignments | |'
		done
	done | sort
}
expect_claims() {
	assert_cat "$MNT/claims" "$1"
	assert_eq "$(walk)" "$1" "the claims every assignments/ lists"
}

assert_eq "$(stat -c '%a %u %g %F %s' "$MNT/claims")" "444 0 0 regular empty file 0" "stat claims"
expect_claims ""

touch "$MNT/$A/assignments/vm-1" "$MNT/$C/assignments/vm-3"
expect_claims "$C vm-3"$'\n'"$A vm-1"

# Refused claims are not claims: another instance, a quarantined VF.
expect_err "$EBUSY" touch "$MNT/$A/assignments/vm-2"
put "$MNT/$B/quarantined" 1
expect_err "$EBUSY" touch "$MNT/$B/assignments/vm-2"
expect_claims "$C vm-3"$'\n'"$A vm-1"

# Released, then the VF claimed by another instance.
rm "$MNT/$A/assignments/vm-1"
expect_claims "$C vm-3"
touch "$MNT/$A/assignments/vm-9"
expect_claims "$C vm-3"$'\n'"$A vm-9"

# Anyone reads it; nobody writes or truncates it.
assert_eq "$(as_user 65534 cat "$MNT/claims")" "$C vm-3"$'\n'"$A vm-9" "read by nobody"
expect_err "$EACCES" put "$MNT/claims" "$A vm-1"
expect_err "$EACCES" truncate -s 0 "$MNT/claims"
assert_cat "$MNT/claims" "$C vm-3"$'\n'"$A vm-9"

# A claim and a release wake a poller of the file with the new content.
"$VFTOOL" poll "$MNT/claims" 10000 "$C vm-3"$'\n'"$A vm-9"$'\n'"$B vm-5" >"$T/poll.out" &
poller=$!
BG_PIDS+=("$poller")
wait_for 10 "the poller to arm" grep -q armed "$T/poll.out"
put "$MNT/$B/quarantined" 0
touch "$MNT/$B/assignments/vm-5"
wait "$poller" || fail "the poller was not woken by a claim: $(cat "$T/poll.out")"
assert_eq "$(sed -n 2p "$T/poll.out")" "woken POLLPRI POLLERR" "poll wake-up"
"$VFTOOL" poll "$MNT/claims" 10000 "$C vm-3"$'\n'"$A vm-9" >"$T/poll2.out" &
poller=$!
BG_PIDS+=("$poller")
wait_for 10 "the poller to arm" grep -q armed "$T/poll2.out"
rm "$MNT/$B/assignments/vm-5"
wait "$poller" || fail "the poller was not woken by a release: $(cat "$T/poll2.out")"

# inotify (when inotifywait is here): a claim modifies the file.
if command -v inotifywait >/dev/null; then
	background inotifywait -m -e modify --format '%w%f %e' "$MNT/claims" >"$T/inotify.out" 2>"$T/inotify.err"
	wait_for 10 "inotifywait to start" grep -q "Watches established" "$T/inotify.err"
	touch "$MNT/$B/assignments/vm-6"
	wait_for 10 "IN_MODIFY on claims" grep -qx "$MNT/claims MODIFY" "$T/inotify.out"
fi
expect_claims "$C vm-3"$'\n'"$A vm-9"$'\n'"$B vm-6"

# Kept across a restart (the claims are in the database).
stop_daemon
start_daemon
expect_claims "$C vm-3"$'\n'"$A vm-9"$'\n'"$B vm-6"
echo PASS
