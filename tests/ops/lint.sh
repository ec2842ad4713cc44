#!/usr/bin/env bash
# lint.sh - the shipped scripts parse (bash -n, py_compile) and pass
# the shellcheck linter when it is installed; the man pages render without groff
# warnings.  These are what operators paste and run.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"

cd "$source_root"
mapfile -t shell_scripts < <(ls examples/*.sh examples/*/*.sh tests/ops/*.sh 2>/dev/null)
mapfile -t python_scripts < <(ls examples/*/*.py 2>/dev/null)
((${#shell_scripts[@]} >= 6)) || fail "found only ${#shell_scripts[@]} shell scripts"

errors=0
for s in "${shell_scripts[@]}"; do
	bash -n "$s" || { echo "FAIL bash -n $s" >&2; errors=$((errors + 1)); }
done
for p in "${python_scripts[@]}"; do
	python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' "$p" ||
		{ echo "FAIL python syntax $p" >&2; errors=$((errors + 1)); }
done
if command -v shellcheck >/dev/null; then
	shellcheck -x --source-path=SCRIPTDIR -- "${shell_scripts[@]}" || errors=$((errors + 1))
else
	echo "note: shellcheck not installed; scripts only parsed"
fi
if command -v groff >/dev/null; then
	for page in docs/man/*.[1-8]; do
		[[ -f $page ]] || continue
		w=$(groff -man -ww -z -- "$page" 2>&1) || true
		[[ -z $w ]] || { echo "FAIL $page: $w" >&2; errors=$((errors + 1)); }
	done
fi
((errors == 0)) || fail "$errors lint error(s)"
echo "lint OK"
