#!/usr/bin/env bash
# lint.sh - the shipped scripts parse (bash -n, py_compile) and pass
# the shellcheck linter when it is installed; the man pages render without groff
# warnings.  These are what operators paste and run.
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"

cd "$source_root"
mapfile -t shell_scripts < <(ls examples/*.sh examples/*/*.sh tests/ops/*.sh tests/integrations/*.sh tests/systemd/*.sh 2>/dev/null)
# Python scripts: by name, and executables without one by their #! line.
mapfile -t python_scripts < <(ls examples/*/*.py 2>/dev/null
	for f in examples/*/*; do
		[[ -x $f && $f != *.* ]] && head -n1 -- "$f" | grep -q '^#!.*python3' && echo "$f"
	done)
((${#python_scripts[@]} >= 2)) || fail "found only ${#python_scripts[@]} python scripts"
((${#shell_scripts[@]} >= 6)) || fail "found only ${#shell_scripts[@]} shell scripts"

errors=0
# Each parses under the shell it declares (#!/bin/sh: dash, Debian's sh).
for s in "${shell_scripts[@]}"; do
	sh=bash
	head -n1 -- "$s" | grep -q '^#! */bin/sh$' && sh=dash
	"$sh" -n "$s" || { echo "FAIL $sh -n $s" >&2; errors=$((errors + 1)); }
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
