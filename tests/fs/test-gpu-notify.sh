#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Change notification of a parent GPU's files (gpus/PF/state, drain, vfs,
# history), both ways (inotify and sysfs-style poll), as for VF/quarantined:
# a drain written by another process, the last claim on a draining GPU
# ending (draining -> drained), a VF registered, given the GPU as parent or
# unregistered.  Exactly when what a file says changes: a claim on a serving
# GPU's VF leaves its state unannounced, and an unrelated GPU's files see no
# event at all.  Absence is proven against a marker, not a sleep: a hold on
# a VF (VF/quarantined, page-cached) is announced by the notifier thread in
# the same pass as, or a later one than, everything changed before it, and
# within a pass a GPU's files are touched before a VF's, so when the
# marker's event (on VF/state, which nobody writes) is seen every earlier
# event is too.  A writer's own write is an IN_MODIFY of its file as well:
# counts are taken as changes from a baseline (since).
source "$(dirname "$0")/lib.sh"
require_fuse
require_cmd inotifywait:inotify-tools

fake_sysfs 0000:41:00.1 0000:41:00.2 0000:41:00.3 0000:42:00.1
start_daemon

for vf in 0000:41:00.1 0000:41:00.2 0000:42:00.1; do
	mkdir "$MNT/$vf"
done
# Its GPUs known from the start: what their files said then is what a
# watcher has seen (a GPU that appears later has its first change
# announced, whatever it is).
stop_daemon
start_daemon
G=$MNT/gpus/0000:41:00.0
H=$MNT/gpus/0000:42:00.0 # unrelated: no event may reach its files
M=$MNT/0000:41:00.2      # the marker VF (its quarantined file)
assert_cat "$G/state" serving
assert_cat "$H/state" serving

# events NAME FILE: the IN_CLOSE_WRITE events of FILE seen so far, one a
# write through an open file: a touch by the notifier, or a writer's own
# (whose redirection truncates and writes, two IN_MODIFY).
events() {
	grep -cx "$2 CLOSE_WRITE,CLOSE" "$T/$1.out" || true
}

# marker NAME: a hold on the marker VF, then its clear, each waited for
# until inotify NAME saw it touch the VF's state: every event of what
# changed before the hold is in by then.
marker() {
	local base
	base=$(events "$1" "$M/state")
	put "$M/quarantined" 1
	wait_for 10 "the marker's hold" events_above "$1" "$M/state" "$base"
	put "$M/quarantined" 0
	wait_for 10 "the marker's clear" events_above "$1" "$M/state" $((base + 1))
}
events_above() { (($(events "$1" "$2") > $3)); }

# since: remember every GPU file's count; delta FILE: its events since.
declare -A base_count
since() {
	local f
	for f in "$G"/{state,drain,vfs,history} "$H"/{state,drain,vfs,history}; do
		base_count[$f]=$(events gpus "$f")
	done
}
delta() { echo $(($(events gpus "$1") - base_count[$1])); }

start_inotify gpus "$G/state" "$G/drain" "$G/vfs" "$G/history" \
	"$H/state" "$H/drain" "$H/vfs" "$H/history" "$M/state"
since

# --- a claim on a serving GPU's VF changes none of its files
touch "$MNT/0000:41:00.1/assignments/vm-a"
marker gpus
for f in state drain vfs history; do
	assert_eq "$(delta "$G/$f")" 0 "events of $f after a claim on a serving GPU"
done

# --- a drain written by another process (dash): state, drain and history
start_poll state_draining "$G/state" draining
start_poll drain_1 "$G/drain" 1
start_poll history_drain "$G/history"
since
dash -c 'echo 1 > "$1"' sh "$G/drain"
expect_woken state_draining
expect_woken drain_1
expect_inotify gpus "$G/state MODIFY"
expect_inotify gpus "$G/state CLOSE_WRITE,CLOSE"
expect_inotify gpus "$G/drain MODIFY"
expect_inotify gpus "$G/history MODIFY"
expect_woken history_drain
assert_match "$(sed -n 3p "$T/history_drain.out")" ' drain by=0$' "history after a drain"
assert_cat "$G/state" draining
marker gpus
assert_eq "$(delta "$G/state")" 1 "state events of one drain"
assert_eq "$(delta "$G/history")" 1 "history events of one drain"
# the writer's own write, and the notifier's
assert_eq "$(delta "$G/drain")" 2 "drain events of one drain"
assert_eq "$(delta "$G/vfs")" 0 "vfs events of a drain"

# --- the last claim on the draining GPU ends: draining -> drained
start_poll state_drained "$G/state" drained
since
rm "$MNT/0000:41:00.1/assignments/vm-a"
expect_woken state_drained
assert_cat "$G/state" drained
marker gpus
assert_eq "$(delta "$G/state")" 1 "state events of the last claim's end"
assert_eq "$(delta "$G/drain")" 0 "drain events (it still says 1)"
assert_eq "$(delta "$G/history")" 0 "history events (a release is no drain event)"

# --- VFs joining and leaving the GPU change vfs, and only vfs
since
start_poll vfs_joined "$G/vfs" "$(printf '0000:41:00.1\n0000:41:00.2\n0000:41:00.3')"
mkdir "$MNT/0000:41:00.3" # sysfs names its parent
expect_woken vfs_joined
expect_inotify gpus "$G/vfs MODIFY"
mkdir "$MNT/0000:43:00.1" # no sysfs entry: no parent, no GPU
start_poll vfs_parent "$G/vfs" "$(printf '0000:41:00.1\n0000:41:00.2\n0000:41:00.3\n0000:43:00.1')"
mkdir -p "$SYSFS_DEVICES/0000:43:00.1" # its sysfs entry appears, under GPU 41
ln -s ../0000:41:00.0 "$SYSFS_DEVICES/0000:43:00.1/physfn"
put "$MNT/0000:43:00.1/parent" 0000:41:00.0
expect_woken vfs_parent
start_poll vfs_left "$G/vfs" "$(printf '0000:41:00.1\n0000:41:00.2\n0000:41:00.3')"
rmdir "$MNT/0000:43:00.1"
expect_woken vfs_left
marker gpus
assert_eq "$(delta "$G/vfs")" 3 "vfs events of a registration, a parent, an unregistration"
assert_eq "$(delta "$G/state")" 0 "state events (unchanged by VFs without claims)"

# --- the drain ends: serving again
start_poll state_serving "$G/state" serving
since
bash -c 'echo 0 > "$1"' sh "$G/drain"
expect_woken state_serving
marker gpus
assert_eq "$(delta "$G/state")" 1 "state events of the drain's end"
assert_eq "$(delta "$G/drain")" 2 "drain events of the drain's end"
assert_eq "$(delta "$G/history")" 1 "history events of the drain's end"

# --- the unrelated GPU's files saw nothing of all that
for f in state drain vfs history; do
	assert_eq "$(events gpus "$H/$f")" 0 "events of the unrelated GPU's $f"
done
assert_cat "$H/state" serving
# ...but its own drain reaches it
start_poll h_state "$H/state" drained
put "$H/drain" 1
expect_woken h_state
expect_inotify gpus "$H/state MODIFY"

# The notifier's own writes changed nothing.
assert_cat "$G/drain" 0
assert_cat "$G/vfs" "$(printf '0000:41:00.1\n0000:41:00.2\n0000:41:00.3')"
assert_eq "$(grep -c ' by=0$' <(cat "$G/history"))" 2 "history lines"
stop_daemon
echo "ok"
