#!/usr/bin/env bash
# The whole suite: cmocka unit tests (built under ASan/UBSan), then the
# integration scripts in tests/integration/ (each one test: exit 0 passes,
# 77 skips, anything else fails).  Ends with "N passed, N failed, N skipped".
# Arguments, if any, are name patterns (shell globs): only the unit binaries
# and integration scripts whose names match run.
set -u
selected() { # NAME: true if no pattern was given or one matches
	[ ${#patterns[@]} -eq 0 ] && return 0
	local p
	for p in "${patterns[@]}"; do
		# shellcheck disable=SC2053
		[[ $1 == $p ]] && return 0
	done
	return 1
}
patterns=("$@")
cd "$(dirname "$0")/.."
passed=0 failed=0 skipped=0
failures=()
log=build/test-logs
mkdir -p "$log"

for t in build/tests/test_*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	selected "$name" || continue
	out=$("$t" 2>&1)
	rc=$?
	printf '%s\n' "$out" > "$log/$name.log"
	p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
	f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -1)
	s=$(printf '%s\n' "$out" | sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' | tail -1)
	p=${p:-0} f=${f:-0} s=${s:-0}
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi # crashed (sanitizer)
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	status=ok; [ "$f" -gt 0 ] && { status=FAIL; failures+=("$name"); }
	printf '%-5s unit/%s (%s passed, %s failed, %s skipped)\n' "$status" "$name" "$p" "$f" "$s"
	[ "$f" -gt 0 ] && printf '%s\n' "$out" | grep -E 'FAILED|ERROR|error|Sanitizer' | head -20 | sed 's/^/      /'
done

for t in tests/integration/test_*.sh; do
	[ -f "$t" ] || continue
	name=$(basename "$t" .sh)
	selected "$name" || continue
	start=$(date +%s)
	# One integration test at a time on this machine, across checkouts:
	# they load BPF programs and measure timing, and two at once on a
	# small machine make each other's sample counts and lags wrong.  -o: a
	# server or agent the test left behind does not keep the lock.
	flock -o "${STRATA_TEST_LOCK:-/tmp/strata-integration.lock}" bash "$t" > "$log/$name.log" 2>&1
	rc=$?
	secs=$(( $(date +%s) - start ))
	case $rc in
	0) passed=$((passed + 1)); printf 'ok    integration/%s (%ss)\n' "$name" "$secs" ;;
	77) skipped=$((skipped + 1)); printf 'skip  integration/%s: %s\n' "$name" "$(tail -1 "$log/$name.log")" ;;
	*) failed=$((failed + 1)); failures+=("$name")
	   printf 'FAIL  integration/%s (rc=%s, %ss); last lines of %s:\n' "$name" "$rc" "$secs" "$log/$name.log"
	   tail -15 "$log/$name.log" | sed 's/^/      /' ;;
	esac
done

[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
