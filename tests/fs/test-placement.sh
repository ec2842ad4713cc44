#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Placement on a real mount: each VF's parent GPU, read
# from its sysfs physfn link at registration (--sysfs-root, a tree of our
# own) or written once to VF/parent, and persisted; `allocatable` lists the
# VFs a claim may take, in placement order, checked on each of 100 reads:
# by the VF's own evidence (clean, then suspect, then failing: one failed
# assignment on record), then by how many VFs of its GPU are out of
# service (none, then an unknown GPU, then one out, then two), held-back
# VFs last, a fresh random order among equals for each open; claimed and
# out-of-service VFs are absent; inotify and poll watchers are woken when it changes; it fails
# closed (EIO) while the store is unavailable; and the placement example
# claims the first VF it can, moving on when one is busy.
source "$(dirname "$0")/lib.sh"
require_fuse
require_cmd inotifywait:inotify-tools
place=$(cd "$(dirname "$0")/../../examples/placement" && pwd)/place.sh
mount_tmpfs "$T/db" 4m 0700

# sysfs: GPU 41 with VFs .1 .2 .3, GPU 42 with VFs .1 .2 .3 .4 (physfn ->
# ../PF, as the kernel links them); 43:00.1 and 44:00.1 have no physfn.
fake_sysfs 0000:41:00.1 0000:41:00.2 0000:41:00.3 0000:42:00.1 0000:42:00.2 0000:42:00.3 \
	0000:42:00.4
mkdir -p "$SYSFS_DEVICES/0000:43:00.1"
start_daemon --init-window 60

# --- notification: one VF, so the content says which change was seen
N=$MNT/0000:44:00.1
background inotifywait -m -e close_write --format '%f %e' "$MNT" >"$T/iw.out" 2>"$T/iw.err"
wait_until 10 grep -q "Watches established" "$T/iw.err" || fail "inotifywait did not start"
alloc_events() { grep -c '^allocatable CLOSE_WRITE' "$T/iw.out" || true; }
# alloc_events_above N: more than N inotify events on allocatable so far
alloc_events_above() { (($(alloc_events) > $1)); }
mkdir "$N"
wait_for 10 "the inotify event of a registration" alloc_events_above 0
assert_cat "$MNT/allocatable" 0000:44:00.1
assert_cat "$N/parent" ""
before=$(alloc_events)
background "$VFTOOL" poll "$MNT/allocatable" 10000 "" >"$T/poll1.out"
POLL1=${BG_PIDS[-1]}
wait_until 10 grep -q armed "$T/poll1.out" || fail "poll watcher did not start"
touch "$N/assignments/vm-n"     # claimed: gone from the list
wait "$POLL1" || fail "the poll watcher was not woken by a claim: $(cat "$T/poll1.out")"
assert_eq "$(sed -n 2p "$T/poll1.out")" "woken POLLPRI POLLERR" "poll watcher"
wait_for 10 "the inotify event of a claim" alloc_events_above "$before"
assert_cat "$MNT/allocatable" ""
background "$VFTOOL" poll "$MNT/allocatable" 10000 0000:44:00.1 >"$T/poll2.out"
POLL2=${BG_PIDS[-1]}
wait_until 10 grep -q armed "$T/poll2.out" || fail "poll watcher did not start"
before=$(alloc_events)
rm "$N/assignments/vm-n"        # released: back
wait "$POLL2" || fail "the poll watcher was not woken by a release: $(cat "$T/poll2.out")"
wait_for 10 "the inotify event of a release" alloc_events_above "$before"
before=$(alloc_events)
fake_sysfs 0000:44:00.1        # its sysfs entry appears
put "$N/parent" 0000:44:00.0    # a parent learnt: the groups may change
wait_for 10 "the inotify event of a parent" alloc_events_above "$before"
rmdir "$N"

# --- parents: from sysfs only (at registration, or recorded by a write)
for vf in 0000:41:00.1 0000:41:00.2 0000:41:00.3 0000:42:00.1 0000:42:00.2 0000:42:00.3 \
	0000:42:00.4 0000:43:00.1; do
	mkdir "$MNT/$vf"
done
assert_cat "$MNT/0000:41:00.2/parent" 0000:41:00.0
assert_cat "$MNT/0000:42:00.4/parent" 0000:42:00.0
assert_eq "$(od -An -c "$MNT/0000:43:00.1/parent" | tr -d ' ')" '\n' "an unknown parent (an empty line)"
assert_eq "$(stat -c %a "$MNT/0000:43:00.1/parent")" 664 "mode of parent"
P=$MNT/0000:43:00.1/parent
expect_err "$EINVAL" put "$P" 0000:43:00
expect_err "$EINVAL" put "$P" "0000:43:00.0 x"
expect_err "$EINVAL" put "$P" 0000:43:00.1   # not its own parent
expect_err "$EPERM" put "$P" 0000:43:00.0     # sysfs shows no physfn yet
assert_cat "$P" ""
ln -s ../0000:43:00.0 "$SYSFS_DEVICES/0000:43:00.1/physfn" # now it does
expect_err "$EPERM" put "$P" 0000:45:00.0      # not what sysfs says
assert_cat "$P" ""
put "$P" 0000:43:00.0
assert_cat "$P" 0000:43:00.0
put "$P" 0000:43:00.0                          # the same again: nothing changes
expect_err "$EPERM" put "$P" 0000:45:00.0
expect_err "$EPERM" put "$MNT/0000:41:00.1/parent" 0000:45:00.0  # sysfs set it
grep -qF "sysfs's physfn link names another device" "$DAEMON_LOG" || fail "the refusal's reason is not logged"
assert_cat "$P" 0000:43:00.0
expect_err "$EACCES" as_user 65534 sh -c 'echo 0000:45:00.0 > "$1"' sh "$MNT/0000:42:00.1/parent"
grep -qF "0000:43:00.1: parent GPU set to 0000:43:00.0" "$DAEMON_LOG" || fail "the parent write is not logged"
grep -qF "0000:41:00.1: registered (parent GPU 0000:41:00.0)" "$DAEMON_LOG" ||
	fail "the registration does not log its parent"

# --- all in service: one group, every VF once, more than one order
all=$(printf '%s\n' 0000:41:00.1 0000:41:00.2 0000:41:00.3 0000:42:00.1 0000:42:00.2 \
	0000:42:00.3 0000:42:00.4 0000:43:00.1)
declare -A orders=()
for _ in $(seq 20); do
	got=$(cat "$MNT/allocatable")
	assert_eq "$(sort <<<"$got")" "$all" "allocatable as a set"
	orders[$got]=1
done
((${#orders[@]} > 1)) || fail "20 reads of allocatable gave one order: $got"

# --- groups: GPU 41 gets a VF out of service (a hold), 42:00.1 is claimed,
# 43:00.1 is quarantined (its GPU has no other VF), 42:00.2 held back by a
# cap of 1
put "$MNT/max_quarantined" 1
put "$MNT/0000:41:00.3/quarantined" 1
touch "$MNT/0000:42:00.1/assignments/vm-1"
put "$MNT/0000:43:00.1/report" "failed vm-q1 2026-11-29T07:00:00Z x"
put "$MNT/0000:43:00.1/report" "failed vm-q2 2026-11-29T07:00:01Z x"
assert_cat "$MNT/0000:43:00.1/state" quarantined
put "$MNT/0000:42:00.2/report" "failed vm-h1 2026-11-29T07:00:00Z x"
put "$MNT/0000:42:00.2/report" "failed vm-h2 2026-11-29T07:00:01Z x"
assert_cat "$MNT/0000:42:00.2/state" held-back
declare -A firsts=() seconds=()
for _ in $(seq 30); do
	mapfile -t lines < "$MNT/allocatable"
	assert_eq "${#lines[@]}" 5 "allocatable lines: ${lines[*]}"
	assert_eq "$(printf '%s\n' "${lines[@]:0:2}" | sort)" $'0000:42:00.3\n0000:42:00.4' \
		"the first group (a GPU with no VF out of service): ${lines[*]}"
	assert_eq "$(printf '%s\n' "${lines[@]:2:2}" | sort)" $'0000:41:00.1\n0000:41:00.2' \
		"the second group (a GPU with a VF out of service): ${lines[*]}"
	assert_eq "${lines[4]}" 0000:42:00.2 "the held-back VF, last"
	firsts[${lines[0]}]=1
	seconds[${lines[2]}]=1
done
((${#firsts[@]} == 2 && ${#seconds[@]} == 2)) ||
	fail "30 reads did not vary the order within each group: ${!firsts[*]} / ${!seconds[*]}"
assert_match "$(cat "$MNT/resources")" $'\nallocatable_slots 5\n' "resources agrees"
# a reader who may not write sees the same
assert_eq "$(as_user 65534 cat "$MNT/allocatable" | wc -l)" 5 "lines for an unprivileged reader"

# --- evidence first, then the GPU: GPU 46 (.1-.4) gets two VFs held, so
# it ranks after GPU 41 (one out); 42:00.4 gets one failed assignment (a
# real report below the threshold: failing, after every clean VF, whatever
# its GPU), 46:00.4 a VMM that died in its init window (suspect: after the
# clean VFs, before the failing one); 47:00.1 has no known GPU (after the
# clean GPUs, before GPU 41).
fake_sysfs 0000:46:00.1 0000:46:00.2 0000:46:00.3 0000:46:00.4
for vf in 0000:46:00.1 0000:46:00.2 0000:46:00.3 0000:46:00.4 0000:47:00.1; do mkdir "$MNT/$vf"; done
put "$MNT/0000:46:00.1/quarantined" 1
put "$MNT/0000:46:00.2/quarantined" 1
put "$MNT/0000:42:00.4/report" "failed vm-f1 2026-11-29T07:00:00Z NVRM: RmInitAdapter failed!"
assert_cat "$MNT/0000:42:00.4/state" failing
c=$(date -u -d '-1 second' +%Y-%m-%dT%H:%M:%S.000000000Z)
put "$MNT/0000:46:00.4/assignments/vm-s1" "claimed_at=$c"
printf 'release=%s\nended=crash\ndied_at=%s\n' "$c" "$(date -u +%Y-%m-%dT%H:%M:%S.000000000Z)" >"$T/crash"
cat "$T/crash" >"$MNT/0000:46:00.4/assignments/vm-s1"
assert_cat "$MNT/0000:46:00.4/state" suspect
# the order, one set of VFs per rank
want=("0000:42:00.3" "0000:47:00.1" "0000:41:00.1 0000:41:00.2" "0000:46:00.3" "0000:46:00.4"
	"0000:42:00.4" "0000:42:00.2")
declare -A firsts=()
for read in $(seq 100); do
	mapfile -t lines < "$MNT/allocatable"
	assert_eq "${#lines[@]}" 8 "allocatable lines (read $read): ${lines[*]}"
	declare -A seen=()
	at=0
	for w in "${want[@]}"; do
		read -ra vfs <<<"$w"
		for v in "${lines[@]:at:${#vfs[@]}}"; do
			[[ " $w " == *" $v "* && -z ${seen[$v]:-} ]] ||
				fail "read $read: $v where $w belongs: ${lines[*]}"
			seen[$v]=1
		done
		at=$((at + ${#vfs[@]}))
	done
	unset seen
	firsts[${lines[2]}]=1
done
((${#firsts[@]} == 2)) || fail "100 reads did not vary the order of equals: ${!firsts[*]}"
put "$MNT/0000:46:00.1/quarantined" 0
put "$MNT/0000:46:00.2/quarantined" 0
put "$MNT/0000:42:00.4/quarantined" 0
put "$MNT/0000:46:00.4/quarantined" 0
for vf in 0000:46:00.1 0000:46:00.2 0000:46:00.3 0000:46:00.4 0000:47:00.1; do rmdir "$MNT/$vf"; done
assert_eq "$(grep -c . "$MNT/allocatable")" 5 "allocatable after the evidence is cleared"

# --- the placement example: the first line, claimed; a busy VF skipped
out=$("$place" --mount "$MNT" --pid $$ vm-p1 2>"$T/place.err") || fail "place.sh failed: $(cat "$T/place.err")"
assert_match "$out" '^0000:42:00\.[34]$' "place.sh took a VF of the first group"
grep -qx "pid=$$" "$MNT/$out/assignments/vm-p1" || fail "the claim's first write: $(cat "$MNT/$out/assignments/vm-p1")"
# the list a scheduler read before vm-1 claimed 42:00.1: busy, skipped
out=$(printf '0000:42:00.1\n0000:41:00.3\n0000:41:00.2\n' |
	"$place" --mount "$MNT" --candidates - --pid $$ vm-p2 2>"$T/place.err") ||
	fail "place.sh failed: $(cat "$T/place.err")"
assert_eq "$out" 0000:41:00.2 "place.sh after two busy VFs"
assert_eq "$(cat "$T/place.err")" $'busy   0000:42:00.1\nbusy   0000:41:00.3' "what place.sh skipped"
assert_eq "$(grep -c . "$MNT/allocatable")" 3 "allocatable after two placements"

# --- persisted: parents survive a restart
stop_daemon
start_daemon
assert_cat "$MNT/0000:43:00.1/parent" 0000:43:00.0
assert_cat "$MNT/0000:41:00.1/parent" 0000:41:00.0
expect_err "$EPERM" put "$MNT/0000:43:00.1/parent" 0000:45:00.0

# --- fail closed: EIO while the store cannot commit, for writers and readers
dd if=/dev/zero of="$T/db/fill" bs=64k 2>/dev/null || true
expect_err "$EIO" put "$MNT/0000:42:00.3/quarantined" 1
assert_match "$(cat "$MNT/status")" "^unavailable: " "status while full"
expect_err "$EIO" cat "$MNT/allocatable"
expect_err "$EIO" as_user 65534 cat "$MNT/allocatable"
rc=0; "$place" --mount "$MNT" --pid $$ vm-p3 2>"$T/place.err" || rc=$?
assert_eq "$rc" 1 "place.sh exit while unavailable"
assert_cat "$MNT/0000:43:00.1/parent" 0000:43:00.0 # not placement-facing: served from memory
rm -f "$T/db/fill"
put "$MNT/status" repair
assert_eq "$(grep -c . "$MNT/allocatable")" 3 "allocatable after the repair"

stop_daemon
echo "ok"
