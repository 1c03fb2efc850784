#!/usr/bin/env bash
# The fuzz corpora as a regression suite: every input the fuzzing campaigns
# kept (tests/fuzz/corpus/, see docs/benchmarks.md) and the seeds made from
# real files run once through each libFuzzer target, under ASan and UBSan.
# A parser change that crashes, leaks or hits undefined behaviour on any
# of them fails here, in every suite run, not hours into the next campaign.
source "$(dirname "$0")/lib.sh"

command -v clang > /dev/null || skip "no clang"
ls "$ROOT"/build/fuzz/libstrata-*.a > /dev/null 2>&1 ||
	skip "no fuzz build of the layers (make test builds it; or make fuzz-replay)"

out=$T/replay.out
# run alone (tests/run.sh), the archives may be older than the sources
make -s -C "$ROOT" fuzz-archives > "$out" 2>&1 || { cat "$out"; fail "make fuzz-archives"; }
if ! "$ROOT/tests/fuzz/run.sh" --replay > "$out" 2>&1; then
	cat "$out"
	fail "a fuzz target failed on a kept input"
fi
cat "$out" | grep -E 'REPLAY|DONE'
# Each target ran at least its committed inputs (an empty or missing
# corpus would make this test pass while checking nothing).
for src in "$ROOT"/tests/fuzz/fuzz_*.c; do
	t=$(basename "$src" .c)
	t=${t#fuzz_}
	d=$ROOT/tests/fuzz/corpus/$t
	kept=$(find "$d" -type f 2> /dev/null | wc -l)
	[ "$kept" -ge 10 ] || fail "$t: only $kept committed inputs"
	# what libFuzzer itself read (its log), not what run.sh counted
	ran=$(sed -n 's/^INFO: seed corpus: files: \([0-9]*\).*/\1/p' \
		"$ROOT/build/fuzz/replay/$t.log" 2> /dev/null)
	[ -n "$ran" ] && [ "$ran" -ge "$kept" ] || fail "$t: replayed ${ran:-no} inputs of $kept kept"
done
echo "$(ls "$ROOT"/tests/fuzz/fuzz_*.c | wc -l) targets replayed their kept inputs cleanly"
