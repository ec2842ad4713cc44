#!/usr/bin/env bash
# docs.sh - the documentation agrees with a live mount and with itself:
#  * every man page renders without warnings (`man --warnings`, 80 columns);
#    each names every other vfhealth page under SEE ALSO, and the overview's
#    list of installed man pages names every page;
#  * every file and directory of a live mount (the top level, a VF directory,
#    its assignments/, a claim and a GPU directory) appears in vfhealth(5) and in
#    docs/interface.md, in the right section, with the mode ls -l shows, and
#    neither document lists one the mount does not have;
#  * every metric family of a live `metrics` (the sentinel running, so its
#    series are there) is in vfhealth(5)'s metric list, which names no other,
#    and every series docs/detection.md lists is one of them;
#  * the report-outcome examples of vfhealth(5) and docs/interface.md, run as
#    printed against the mount, print the outcome they promise;
#  * vfhealth(5)'s claim example, run as printed in bash and in dash, makes
#    the claim it shows with every attribute, and releases it (the manager's
#    recipes of docs/interface.md: tests/ops/manager-recipes.sh).
# Skips (77) only without FUSE, man-db, dash or sqlite3.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"
require_fuse
require_cmd man:man-db col:bsdextrautils perl dash sqlite3
cd "$source_root"

errors=0
bad() { echo "FAIL: $*" >&2; errors=$((errors + 1)); }

# ---- the man pages themselves -------------------------------------------------

mapfile -t pages < <(ls docs/man/*.[1-8])
((${#pages[@]} >= 4)) || fail "found only ${#pages[@]} man pages"
# page_name docs/man/vfhealth-sentinel.8 -> vfhealth-sentinel(8)
page_name() { local b=${1##*/}; echo "${b%.*}(${b##*.})"; }
# render PAGE: plain text as an operator reads it, wide enough that no line
# of a literal example wraps.
render() { MANWIDTH=200 man -l -- "$1" 2>/dev/null | col -bx; }
for page in "${pages[@]}"; do
	w=$(MANWIDTH=80 man --warnings -l -Tutf8 -- "$page" 2>&1 >/dev/null) || bad "man -l $page failed"
	[[ -z $w ]] || bad "$page renders with warnings: $w"
	see_also=$(render "$page" | sed -n '/^SEE ALSO/,/^[A-Z]/p')
	for other in "${pages[@]}"; do
		[[ $other == "$page" ]] && continue
		grep -qF -- "$(page_name "$other")" <<<"$see_also" ||
			bad "$(page_name "$page") SEE ALSO does not name $(page_name "$other")"
	done
	grep -qF -- "$(page_name "$page")" docs/overview.md ||
		bad "docs/overview.md does not list the man page $(page_name "$page")"
done

# ---- a live mount ------------------------------------------------------------------

mnt=$MNT
vf=0000:41:00.4
# sysfs names the VF's parent: the GPU directory exists
mkdir -p "$T/sys/bus/pci/devices/$vf"
ln -s ../0000:41:00.0 "$T/sys/bus/pci/devices/$vf/physfn"
start_daemon --poll-interval 0.2 --poll-timeout 0.5 --sysfs-root "$T/sys"
mkdir "$mnt/$vf" "$mnt/0000:41:00.5"
: > "$mnt/$vf/assignments/vm-1"

man5=$T/vfhealth.5.txt
render docs/man/vfhealth.5 > "$man5"

# doc_name DIR-KIND NAME: the name a document gives an entry of the mount.
doc_name() {
	case $1:$2 in
	top:[0-9a-f][0-9a-f][0-9a-f][0-9a-f]:*) echo "VF/" ;;
	assignments:*) echo "assignments/INSTANCE_ID" ;;
	*) if [[ -d $3 ]]; then echo "$2/"; else echo "$2"; fi ;;
	esac
}
# man_mode PATH: "(r, 0444)", "(rw, 0664)" or "(directory, 0755)" from stat.
man_mode() {
	local a
	a=$(stat -c %a -- "$1")
	a=$(printf '%04o' "$((8#$a))")
	if [[ -d $1 ]]; then echo "(directory, $a)";
	elif [[ $a == 0444 ]]; then echo "(r, $a)";
	else echo "(rw, $a)"; fi
}

# The entries of the live mount: section (top or per-VF), name, mode.
live=()
add_live() { # SECTION KIND DIR
	local e
	while IFS= read -r e; do
		live+=("$1|$(doc_name "$2" "$e" "$3/$e")|$(man_mode "$3/$e")")
	done < <(ls -A -- "$3")
}
ls -l "$mnt" "$mnt/$vf" "$mnt/$vf/assignments"   # for the log
add_live top top "$mnt"
add_live vf vf "$mnt/$vf"
add_live vf assignments "$mnt/$vf/assignments"
add_live gpu gpu "$mnt/gpus/0000:41:00.0"
mapfile -t live < <(printf '%s\n' "${live[@]}" | sort -u)   # two VF/ directories

# The entries vfhealth(5) lists, "SECTION|NAME|(MODE)", and interface.md's
# table rows, "SECTION|NAME|MODE" (its modes read "r 0444", "dir 0755").
man_entries() {
	awk '/^TOP-LEVEL FILES/ { s = "top"; next } /^PER-VF FILES/ { s = "vf"; next }
	     /^PER-GPU FILES/ { s = "gpu"; next }
	     /^[A-Z]/ { s = "" }
	     s != "" && match($0, /^       [^ ]+ \((r|rw|directory), [0-7]+\)$/) {
		sub(/^ +/, ""); n = $0; sub(/ .*/, "", n); m = $0; sub(/^[^ ]+ /, "", m)
		print s "|" n "|" m }' "$man5"
}
md_entries() {
	awk -F' *\\| *' '/^## Top level/ { s = "top"; next } /^## Per VF/ { s = "vf"; next }
	     /^## Per GPU/ { s = "gpu"; next }
	     /^## / { s = "" }
	     s != "" && $2 ~ /^`/ { n = $2; gsub(/`/, "", n); sub(/\/ID$/, "/INSTANCE_ID", n); print s "|" n "|" $3 }' docs/interface.md
}
mapfile -t man_list < <(man_entries)
mapfile -t md_list < <(md_entries)
((${#man_list[@]} >= 10)) || fail "parsed only ${#man_list[@]} file entries from vfhealth(5)"
((${#md_list[@]} >= 10)) || fail "parsed only ${#md_list[@]} file entries from docs/interface.md"
# md_mode "(rw, 0664)" -> "rw 0664"; "(directory, 0755)" -> "dir 0755"
md_mode() { local m=${1#(}; m=${m%)}; m=${m/directory/dir}; echo "${m/, / }"; }
for e in "${live[@]}"; do
	printf '%s\n' "${man_list[@]}" | grep -qxF -- "$e" ||
		bad "vfhealth(5) lacks '${e#*|}' in its ${e%%|*} section"
	IFS='|' read -r s n m <<<"$e"
	printf '%s\n' "${md_list[@]}" | grep -qxF -- "$s|$n|$(md_mode "$m")" ||
		bad "docs/interface.md lacks '$n' as $(md_mode "$m") in its $s table"
done
for e in "${man_list[@]}"; do
	printf '%s\n' "${live[@]}" | grep -qxF -- "$e" || bad "vfhealth(5) lists '$e', which the mount does not have (with that mode)"
done
for e in "${md_list[@]}"; do
	IFS='|' read -r s n m <<<"$e"
	found=false
	for l in "${live[@]}"; do
		IFS='|' read -r ls ln lm <<<"$l"
		[[ $ls == "$s" && $ln == "$n" && $(md_mode "$lm") == "$m" ]] && found=true
	done
	$found || bad "docs/interface.md lists '$n' ($m) in its $s table, which the mount does not have (with that mode)"
done

# ---- metric families -----------------------------------------------------------------

sentinel_polled() {
	awk '$1 == "vfhealth_sentinel_polls_total" && $2 >= 1 { found = 1 } END { exit !found }' "$mnt/metrics"
}
wait_for 20 "the sentinel's first poll" sentinel_polled
mapfile -t families < <(awk '$1 == "#" && $2 == "TYPE" { print $3 }' "$mnt/metrics")
((${#families[@]} >= 15)) || fail "only ${#families[@]} families in metrics (is the sentinel's part missing?)"
metric_list=$(sed -n '/^       metrics (r, 0444)$/,/^       VF\/ (directory/p' "$man5")
[[ -n $metric_list ]] || fail "vfhealth(5) has no metrics entry"
documented=$(grep -oE 'vfhealth_[a-z0-9_]+' <<<"$metric_list" | sort -u)
for f in "${families[@]}"; do
	grep -qxF -- "$f" <<<"$documented" || bad "metric family $f is not in vfhealth(5)'s metric list"
done
for f in $documented; do
	# not `printf | grep -q`: grep leaving early SIGPIPEs printf, which
	# pipefail takes for a miss
	grep -qxF -- "$f" < <(printf '%s\n' "${families[@]}") ||
		bad "vfhealth(5)'s metric list names $f, which a live metrics does not have"
done
for f in $(sed -n '/^## Metrics/,/^## /p' docs/detection.md | grep -oE '^\| `vfhealth_[a-z0-9_]+' | tr -d '|` '); do
	grep -qxF -- "$f" <<<"$documented" || bad "docs/detection.md lists $f, which vfhealth(5) does not"
done

# ---- reading a report's outcome, as documented --------------------------------------

# run_example TEXT: the example's lines, on our mount instead of /run/vfhealth.
run_example() {
	local script=$T/example.sh
	sed -e 's/^ *//' -e "s|/run/vfhealth/|$mnt/|g" <<<"$1" > "$script"
	(cd "$T" && bash -- "$script") 2>&1
}
[[ -z $(cat "$mnt/$vf/report") ]] || bad "a fresh open of report does not read empty"
example=$(awk '/^ +exec 3<>\/run\/vfhealth\// { on = 1 } on { print } on && /^ +exec 3>&-$/ { exit }' "$man5")
[[ $(wc -l <<<"$example") -ge 3 ]] || fail "no report-outcome example in vfhealth(5)"
promise=$(sed -n 's/^ *prints \(.*\)\.$/\1/p' "$man5" | head -n1)
[[ -n $promise ]] || fail "vfhealth(5) does not say what the example prints"
got=$(run_example "$example")
[[ $got == "$promise" ]] || bad "vfhealth(5)'s example printed '$got', it promises '$promise'"
[[ $(cat "$mnt/$vf/tally") == 1 ]] || bad "vfhealth(5)'s example did not record a failure"

echo 0 > "$mnt/$vf/quarantined"   # drop the failure: the next example records it anew
example=$(sed -n '/^## Reading a report/,/^## /p' docs/interface.md |
	awk '/^```/ { if (on) exit; if ($0 == "```sh") { on = 1; next } } on')
[[ -n $example ]] || fail "no report-outcome example in docs/interface.md"
promise=$(sed -n 's/.*<&3 *# *//p' <<<"$example")
got=$(run_example "$example")
[[ -n $promise && $got == "$promise" ]] || bad "docs/interface.md's example printed '$got', it promises '$promise'"

# ---- the claim examples, as printed, in bash and in dash ----------------------------

# The VMM's control socket of docs/interface.md lies in a socket directory
# of ours (SOCKET_DIRS), its process is this shell.
claim_man=$(sed -n '/^EXAMPLES/,/^ *Wait for/p' "$man5" | sed -n '/^ *mkdir \/run\/vfhealth\//,/^ *echo "release=/p')
[[ $(grep -c assignments/ <<<"$claim_man") -ge 3 ]] || fail "no claim example in vfhealth(5)"
# run_in SHELL TEXT: the example's lines on our mount, in SHELL.
run_in() {
	local script=$T/claim-example.sh
	sed -e 's/^ *//' -e "s|/run/vfhealth/|$mnt/|g" -e "s|/run/vmm/|$T/vmm/|g" <<<"$2" > "$script"
	(cd "$T" && VMM_PID=$$ "$1" "$script") 2>&1
}
rm -f "$mnt/$vf/assignments/"*
for sh in bash dash; do
	echo 0 > "$mnt/$vf/quarantined"   # no failure on record: it can be unregistered
	rmdir "$mnt/$vf"                  # the man page's example registers it
	got=$(run_in "$sh" "$claim_man")
	if ! grep -qx 'agent=vsock:17:2222' <<<"$got" || ! grep -qx "pid=$$" <<<"$got"; then
		bad "vfhealth(5)'s claim example in $sh did not make the claim it shows: '$got'"
	fi
	[[ -z $(ls "$mnt/$vf/assignments") ]] || bad "vfhealth(5)'s claim example in $sh left a claim"
	grep -q "claim vm-17 released=.* ended=released-if " "$mnt/$vf/history" ||
		bad "vfhealth(5)'s claim example in $sh did not release by claimed_at"
done

((errors == 0)) || fail "$errors disagreement(s) between the docs and the mount"
echo "docs OK: ${#pages[@]} man pages, ${#live[@]} files, ${#families[@]} metric families, 4 examples"
