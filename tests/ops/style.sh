#!/usr/bin/env bash
# style.sh - every C file of the tree is formatted as .clang-format says
# (`clang-format --dry-run --Werror`), so that a reader sees one style and a
# diff shows only what changed.  Run `clang-format -i FILE` to fix one.
# And no file of the tree keeps a merge's conflict markers (a document is
# not compiled, so nothing else would notice), and every Check test case
# states its timeout (check_tcase in tests/common/check-main.h, never a bare
# tcase_create, whose 4 s default fails good tests on a busy machine).
set -euo pipefail
. "$(dirname -- "$0")/lib.sh"

cd "$source_root"
conflicts=$(grep -rlE --exclude-dir='.git' --exclude-dir='build*' --exclude-dir='subprojects' \
	'^(<{7}|>{7})( |$)|^={7}$' . || true)
[[ -z $conflicts ]] || fail "merge conflict markers left in: $(tr '\n' ' ' <<<"$conflicts")"
bare=$(grep -rlE --include='*.c' --include='*.h' '\btcase_create\(' tests |
	grep -vx tests/common/check-main.h || true)
[[ -z $bare ]] || fail "a test case without its timeout (use check_tcase): $(tr '\n' ' ' <<<"$bare")"
require_cmd clang-format:clang-format
[[ -f .clang-format ]] || fail "no .clang-format at the top of the tree"
mapfile -t files < <(find common proto grammar store fs sentinel recovery daemon guest-agent tests \
	-name '*.[ch]' -not -path '*/corpus/*' | sort)
((${#files[@]} >= 100)) || fail "found only ${#files[@]} C files"
bad=()
for f in "${files[@]}"; do
	clang-format --dry-run --Werror -- "$f" 2>/dev/null || bad+=("$f")
done
((${#bad[@]} == 0)) || fail "not formatted as .clang-format says (clang-format -i): ${bad[*]}"
echo "style OK: ${#files[@]} C files"
