#!/usr/bin/env bash
# run-fuzzers.sh - run every libFuzzer target for a while and keep any crash
# as a regression input in its seed corpus (tests/fuzz/corpus/<target>/),
# where the replay test of every build runs it from then on.
#
#   CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined
#   meson compile -C build-fuzz
#   tests/fuzz/run-fuzzers.sh build-fuzz [SECONDS_PER_TARGET] [TARGET...]
#
# The seeds are copied to a scratch corpus so that the inputs libFuzzer
# finds interesting do not bloat the tree; only crashes are kept.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: $0 BUILD_DIR [SECONDS] [TARGET...]}
seconds=${2:-60}
shift $(($# >= 2 ? 2 : 1))
targets=("$@")
if ((${#targets[@]} == 0)); then
	mapfile -t targets < <(cd "$here/corpus" && ls)
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0
for t in "${targets[@]}"; do
	bin=$build/tests/fuzz/fuzz-$t
	if [[ ! -x $bin ]]; then
		echo "run-fuzzers: $bin missing (configure with CC=clang -Dfuzz=true)" >&2
		status=1
		continue
	fi
	mkdir -p "$scratch/$t/corpus" "$scratch/$t/artifacts"
	cp "$here/corpus/$t/"* "$scratch/$t/corpus/"
	"$bin" -max_total_time="$seconds" -max_len=70000 -timeout=10 -rss_limit_mb=1024 \
		-print_final_stats=1 -artifact_prefix="$scratch/$t/artifacts/" \
		"$scratch/$t/corpus" >"$scratch/$t/log" 2>&1
	rc=$?
	runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$scratch/$t/log" | grep -o '[0-9]*$')
	found=0
	for a in "$scratch/$t/artifacts/"*; do
		[[ -f $a ]] || continue
		cp "$a" "$here/corpus/$t/regression-$(basename "$a")"
		found=$((found + 1))
	done
	echo "$t: ${seconds}s, ${runs:-?} runs, exit $rc, $found crash input(s) kept"
	if ((found > 0 || rc != 0)); then
		grep -m 20 -E 'ERROR|invariant failed|SUMMARY' "$scratch/$t/log" >&2
		status=1
	fi
done
exit $status
