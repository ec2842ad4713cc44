#!/usr/bin/env bash
# locks.sh - the lock table of docs/architecture.md is the one statement of
# the lock order, so it must name every lock there is: each mutex, rwlock
# and condition variable declared in the programs' sources (tests aside)
# has a row naming it and its file, and no row names a lock or a file that
# does not exist.  A lock added without its row, or a row left behind by a
# lock that moved, fails here.
set -euo pipefail
cd "${VFHEALTH_SOURCE_ROOT:-$(dirname -- "$0")/../..}"

errors=0
bad() { echo "FAIL: $*" >&2; errors=$((errors + 1)); }

# "file name" for every declaration: struct members and file-scope statics.
mapfile -t dirs < <(ls -d common proto grammar store fs sentinel recovery daemon guest-agent 2>/dev/null)
declared=$(grep -rnoE --include='*.[ch]' \
	'\bpthread_(mutex|rwlock|cond|spinlock)_t[[:space:]]+[A-Za-z_][A-Za-z0-9_]*[[:space:]]*(;|=)' \
	"${dirs[@]}" |
	sed -E 's/^([^:]+):[0-9]+:pthread_[a-z]+_t[[:space:]]+([A-Za-z0-9_]+).*/\1 \2/' | sort -u)
[[ -n $declared ]] || { echo "FAIL: found no lock at all: the pattern is wrong" >&2; exit 1; }

# The table's rows: "| N | locks | kind | files | guards |" between the
# "### The lock table" heading and the next heading.
rows=$(sed -n '/^### The lock table/,/^##/p' docs/architecture.md | grep -E '^\| *[A-Z]?[0-9]+[a-z]? *\|')
[[ -n $rows ]] || { echo "FAIL: docs/architecture.md has no lock table" >&2; exit 1; }

while read -r file name; do
	found=0
	while IFS='|' read -r _ _ locks _ files _; do
		grep -qE "\`([A-Za-z_.]*\.)?$name\`" <<<"$locks" || continue
		grep -qF "\`$file\`" <<<"$files" || continue
		found=1
		break
	done <<<"$rows"
	((found)) || bad "$file declares \`$name\`, which no row of the lock table (docs/architecture.md) names with that file"
done <<<"$declared"

# Every row's files exist and declare every lock the row names.
while IFS='|' read -r _ num locks _ files _; do
	# shellcheck disable=SC2016 # backquotes are the table's, not the shell's
	mapfile -t rfiles < <(grep -oE '`[a-z-]+/[A-Za-z0-9_.-]+\.[ch]`' <<<"$files" | tr -d '`')
	# shellcheck disable=SC2016
	mapfile -t rlocks < <(grep -oE '`[A-Za-z_.]+`' <<<"$locks" | tr -d '`' | sed 's/.*\.//')
	((${#rfiles[@]})) || { bad "row $num names no file"; continue; }
	for f in "${rfiles[@]}"; do [[ -f $f ]] || bad "row $num names $f, which does not exist"; done
	for l in "${rlocks[@]}"; do
		hit=0
		for f in "${rfiles[@]}"; do grep -qE "^$f $l\$" <<<"$declared" && hit=1; done
		((hit)) || bad "row $num names \`$l\`, which none of its files declares"
	done
done <<<"$rows"

n=$(wc -l <<<"$declared")
((errors == 0)) || { echo "locks.sh: $errors problems" >&2; exit 1; }
echo "locks.sh: all $n locks and condition variables are in the lock table"
