# Tiny kernel maps overflow: every drop is counted, samples whose stack could
# not be stored are kept under "[stack lost]" (so totals stay right), and
# nothing fails.
source "$(dirname "$0")/lib.sh"
require_bpf
# Many distinct stacks: kernel paths of read() vary, plus chain's.
"$STRATA" record -v -F 999 --max-stacks 4 -o "$T/stacks.folded" -- \
	sh -c "$FIX/syscalls 2 & $FIX/chain 2; wait" 2> "$T/err"
grep -E 'samples in profile|stacks_map_full|recorded=' "$T/err"
lost=$(sed -n 's/^ *bpf\.stacks_map_full=\([0-9]*\)$/\1/p' "$T/err")
recorded=$(sed -n 's/^ *bpf\.recorded=\([0-9]*\)$/\1/p' "$T/err")
in_file=$(folded_sum "$T/stacks.folded" "" "")
in_lost=$(folded_sum "$T/stacks.folded" "" '\[stack lost\]')
[ "$lost" -gt 0 ] || fail "stack map of 4 never filled"
grep -q "stack_lost=[1-9]" "$T/err" || fail "summary does not report lost stacks"
[ "$in_lost" -gt 0 ] || fail "no [stack lost] samples in the output"
[ "$in_file" -eq "$recorded" ] || fail "file has $in_file samples, BPF recorded $recorded"
echo "ok: stacks map full $lost times, $in_lost samples kept as [stack lost], totals exact"

# Count map of 2 entries: samples beyond it are dropped and counted.
"$STRATA" record -v -F 999 --max-counts 2 -o "$T/counts.folded" -- \
	sh -c "$FIX/syscalls 1 & $FIX/chain 1; wait" 2> "$T/err"
full=$(sed -n 's/^ *bpf\.counts_map_full=\([0-9]*\)$/\1/p' "$T/err")
[ "$full" -gt 0 ] || fail "count map of 2 never filled"
grep -q "map_full=$full " "$T/err" || fail "summary does not report map_full=$full"
echo "ok: count map full, $full samples dropped and reported"
