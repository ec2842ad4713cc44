#!/usr/bin/env bash
# locks.sh - the lock table of docs/architecture.md is the one statement of
# the lock order, so it must name every lock there is and give each its
# place in the order.  Checked here:
#   - each mutex, rwlock and condition variable declared in the programs'
#     sources (and in the test VMM, tests/sentinel/test-vmm.c) has a row
#     naming it and its file, and no row names a lock or a file that does
#     not exist;
#   - each row has a rank, a whole number; no two locks (mutexes, rwlocks)
#     share a rank or a row number; a condition variable's row names the row
#     of its mutex ("with N"), which exists, and has that row's rank; each
#     table lists its rows in rank order;
#   - each row a comment in those sources cites ("row 12", "rows 1b-6",
#     "S1") and each row docs/architecture.md's prose cites ("row 12",
#     "lock 8", "D1") exists.
# A lock added without its row or rank, a row left behind by a lock that
# moved, or a comment citing a row renumbered away fails here.  The order
# itself, a lock taken while one of an equal or higher rank is held, is for
# the ThreadSanitizer run (dev.sh tsan) to catch where the code takes it.
set -euo pipefail
# shellcheck source=../lib/harness.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/../lib/harness.sh"
cd "${VFHEALTH_SOURCE_ROOT:-$(dirname -- "$0")/../..}"

errors=0
bad() { not_ok "$*"; errors=$((errors + 1)); }

# "file name" for every declaration: struct members and file-scope statics.
mapfile -t dirs < <(ls -d common proto grammar store fs sentinel recovery daemon guest-agent 2>/dev/null)
sources=("${dirs[@]}" tests/sentinel/test-vmm.c)
declared=$(grep -rnoE --include='*.[ch]' \
	'\bpthread_(mutex|rwlock|cond|spinlock)_t[[:space:]]+[A-Za-z_][A-Za-z0-9_]*[[:space:]]*(;|=)' \
	"${sources[@]}" |
	sed -E 's/^([^:]+):[0-9]+:pthread_[a-z]+_t[[:space:]]+([A-Za-z0-9_]+).*/\1 \2/' | sort -u)
[[ -n $declared ]] || fail "found no lock at all: the pattern is wrong"

# The tables' rows: "| # | rank | locks | kind | files | guards |" between the
# "### The lock table" heading and the next heading; a table starts at each
# "| # |" header.
table=$(sed -n '/^### The lock table/,/^##/p' docs/architecture.md)
rows=$(grep -E '^\| *[A-Z]?[0-9]+[a-z]? *\|' <<<"$table") || true
[[ -n $rows ]] || fail "docs/architecture.md has no lock table"
trim() { local v=$1; v=${v#"${v%%[![:space:]]*}"}; printf '%s' "${v%"${v##*[![:space:]]}"}"; }

while read -r file name; do
	found=0
	while IFS='|' read -r _ _ _ locks _ files _; do
		[[ $locks =~ \`([A-Za-z_.]*\.)?$name\` && $files == *"\`$file\`"* ]] || continue
		found=1
		break
	done <<<"$rows"
	((found)) || bad "$file declares \`$name\`, which no row of the lock table (docs/architecture.md) names with that file"
done <<<"$declared"
((errors)) || pass "each of the $(wc -l <<<"$declared") locks and conditions declared has a row"

# Every row's files exist and declare every lock the row names; its rank.
declare -A rank_of lock_rank_owner id_is_lock
errors=0
while IFS='|' read -r _ num rank locks kind files _; do
	num=$(trim "$num") rank=$(trim "$rank")
	# shellcheck disable=SC2016 # backquotes are the table's, not the shell's
	mapfile -t rfiles < <(grep -oE '`[a-z-]+/[A-Za-z0-9_./-]+\.[ch]`' <<<"$files" | tr -d '`')
	# shellcheck disable=SC2016
	mapfile -t rlocks < <(grep -oE '`[A-Za-z_.]+`' <<<"$locks" | tr -d '`' | sed 's/.*\.//')
	((${#rfiles[@]})) || bad "row $num names no file"
	for f in "${rfiles[@]}"; do [[ -f $f ]] || bad "row $num names $f, which does not exist"; done
	for l in "${rlocks[@]}"; do
		hit=0
		for f in "${rfiles[@]}"; do [[ $'\n'$declared$'\n' == *$'\n'"$f $l"$'\n'* ]] && hit=1; done
		((hit)) || bad "row $num names \`$l\`, which none of its files declares"
	done
	[[ $rank =~ ^[0-9]+$ ]] || { bad "row $num has no rank (a whole number): '$rank'"; continue; }
	if [[ $kind != *condition* ]]; then
		[[ -z ${id_is_lock[$num]:-} ]] || bad "two locks are row $num"
		id_is_lock[$num]=1
		[[ -z ${lock_rank_owner[$rank]:-} ]] ||
			bad "rows ${lock_rank_owner[$rank]} and $num share rank $rank"
		lock_rank_owner[$rank]=$num
		rank_of[$num]=$rank
	fi
done <<<"$rows"
((errors)) || pass "every row's files declare its locks; every lock has a rank of its own"

# Conditions: the rank of the mutex they wait with.
errors=0
while IFS='|' read -r _ num rank _ kind _; do
	[[ $kind == *condition* ]] || continue
	num=$(trim "$num") rank=$(trim "$rank")
	with=$(sed -nE 's/.*\(with ([A-Z]?[0-9]+[a-z]?).*/\1/p' <<<"$kind")
	[[ -n $with ]] || { bad "condition row $num names no mutex (with N)"; continue; }
	[[ -n ${rank_of[$with]:-} ]] || { bad "condition row $num waits with row $with, which is no lock"; continue; }
	[[ ${rank_of[$with]} == "$rank" ]] ||
		bad "condition row $num has rank $rank, its mutex (row $with) ${rank_of[$with]}"
done <<<"$rows"
((errors)) || pass "every condition variable has its mutex's rank"

# Each table in rank order.
errors=0
prev=-1
while IFS= read -r line; do
	if [[ $line == '| # |'* ]]; then
		prev=-1
		continue
	fi
	[[ $line =~ ^\|\ *([A-Z]?[0-9]+[a-z]?)\ *\|\ *([0-9]+)\ *\| ]] || continue
	((BASH_REMATCH[2] >= prev)) ||
		bad "row ${BASH_REMATCH[1]} (rank ${BASH_REMATCH[2]}) comes after a row of rank $prev"
	prev=${BASH_REMATCH[2]}
done <<<"$table"
((errors)) || pass "each table lists its rows in rank order"

# Citations of rows: in the sources' comments and in architecture.md's prose.
mapfile -t ids < <(cut -d'|' -f2 <<<"$rows" | tr -d ' ' | sort -u)
is_row() {
	local id
	for id in "${ids[@]}"; do [[ $id == "$1" ]] && return 0; done
	return 1
}
errors=0
cited=0
while IFS=: read -r file lineno text; do
	where=$file:$lineno
	for id in $(grep -oE '\b(rows?|locks?) [0-9]+[a-z]?(-[0-9]+[a-z]?)?\b|\b[DSV][0-9]+[a-z]?\b' <<<"$text" |
		sed -E 's/^(rows?|locks?) //' | tr -- '-' '\n'); do
		cited=$((cited + 1))
		is_row "$id" || bad "$where cites row $id, which the lock table does not have"
	done
done < <(grep -rnE --include='*.[ch]' '\brows? [0-9]+[a-z]?\b|\b[DSV][0-9]+[a-z]?\b' "${sources[@]}" |
	grep -E '/\*|^[^:]+:[0-9]+:[[:space:]]*\*'
	grep -nE '\b(rows?|locks?) [0-9]+[a-z]?\b|\b[DSV][0-9]+[a-z]?\b' docs/architecture.md |
	grep -vE '^[0-9]+:\|' | sed 's|^|docs/architecture.md:|')
((cited > 0)) || bad "found no citation of a row at all: the pattern is wrong"
((errors)) || pass "the $cited citations of a row in the sources and the prose name rows that exist"
