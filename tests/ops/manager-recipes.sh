#!/usr/bin/env bash
# manager-recipes.sh - the manager's contract of docs/interface.md, run as
# printed against a live mount, so the doc cannot drift: its shell steps
# (in bash and in dash) and its Python steps, each language's steps in
# order as one script, reserve a VF, start a stand-in VMM (a real process
# that runs until its claim names it), complete the claim with pid=,
# control= and agent=, and release it once the VMM is gone: a VMM that
# exits 0 plainly, one killed by SIGKILL with ended=crash (its VF suspect:
# it died within the init window).  Each run ends with no claim, the claim
# it made on record with every attribute, and the ending it promises; the
# shell recipe on a held VF stops at its first step (EBUSY) and leaves
# nothing.  A recipe without its four steps fails the test.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse
require_cmd dash python3 sqlite3


section=$(sed -n '/^### The manager.s contract/,/^### Claims in detail/p' "$source_root/docs/interface.md")
# blocks LANG: the section's fenced LANG blocks, in order
blocks() {
	awk -v lang="$1" '/^```/ { if (on) { on = 0; next } if ($0 == "```" lang) { on = 1; next } } on' <<<"$section"
}
sh_recipe=$(blocks sh)
py_recipe=$(blocks python)
[[ $(grep -c '^# [1-4]\. ' <<<"$sh_recipe") == 4 ]] || fail "the shell recipe lacks a step: $sh_recipe"
[[ $(grep -c '^# [1-4]\. ' <<<"$py_recipe") == 4 ]] || fail "the Python recipe lacks a step: $py_recipe"

mnt=$MNT
vf=0000:41:00.4
claim=$mnt/$vf/assignments/vm-7
start_daemon --no-sentinel
mkdir "$mnt/$vf" "$T/vmm"
on_mount() { sed -e "s|/run/vfhealth/|$mnt/|g" -e "s|/run/vmm/|$T/vmm/|g" <<<"$1"; }
on_mount "$sh_recipe" >"$T/recipe.sh"
on_mount "$py_recipe" >"$T/recipe.py"
# The stand-in VMM: it runs until its claim names its pid, then exits 0,
# or is killed (crash).
cat >"$T/vmm.sh" <<'VMM'
#!/bin/sh
until grep -qx "pid=$$" "$CLAIM_FILE" 2>/dev/null; do sleep 0.1; done
[ "$1" = crash ] && kill -KILL $$
exit 0
VMM
chmod +x "$T/vmm.sh"
export CLAIM_FILE=$claim CID=17

ended() { awk '$2 == "claim" && $3 == "vm-7" { e = $5 } END { print e }' "$mnt/$vf/history"; }
# run HOW COMMAND...: the recipe COMMAND runs, with a VMM that ends as HOW
# (ok, crash), and leaves what it promises.
run() {
	local how=$1 out last
	shift
	out=$(VMM_COMMAND="$T/vmm.sh $how" timeout 60 "$@" 2>"$T/err") || fail "$* ($how) failed: $out $(cat "$T/err")"
	[[ -z $(ls "$mnt/$vf/assignments") ]] || fail "$* ($how) left a claim"
	last=$(sqlite3 "$DB" "SELECT agent || ' ' || control || ' ' || (pid > 0) FROM claims WHERE instance_id = 'vm-7' ORDER BY id DESC LIMIT 1")
	assert_eq "$last" "vsock:17:2222 $T/vmm/vm-7.ctl 1" "the claim $* ($how) made"
	case $how in
	ok)
		assert_eq "$(ended)" ended=released-if "how $* ($how) released"
		assert_eq "$out" "released $(sqlite3 "$DB" "SELECT claimed_at FROM claims WHERE instance_id = 'vm-7' ORDER BY id DESC LIMIT 1")" \
			"what $* ($how) printed"
		;;
	crash)
		assert_eq "$(ended)" ended=crashed "how $* ($how) released"
		assert_match "$out" "^released .* ended=crash suspect$" "what $* ($how) printed"
		assert_eq "$(cat "$mnt/$vf/state")" suspect "the VF after $* ($how)"
		echo 0 >"$mnt/$vf/quarantined" # clears the suspicion
		;;
	esac
}
cd "$T"
run ok bash recipe.sh
run crash bash recipe.sh
run ok dash recipe.sh
run crash dash recipe.sh
run ok python3 recipe.py
run crash python3 recipe.py
# EBUSY at the first step: nothing is claimed, no VMM started
echo 1 >"$mnt/$vf/quarantined"
if out=$(VMM_COMMAND="$T/vmm.sh ok" bash recipe.sh 2>&1); then fail "the recipe claimed a held VF: $out"; fi
assert_match "$out" "Device or resource busy" "the recipe on a held VF"
if out=$(VMM_COMMAND="$T/vmm.sh ok" python3 recipe.py 2>&1); then fail "the Python recipe claimed a held VF: $out"; fi
assert_match "$out" "VF busy" "the Python recipe on a held VF"
[[ -z $(ls "$mnt/$vf/assignments") ]] || fail "a refused recipe left a claim"
echo "manager recipes OK"
