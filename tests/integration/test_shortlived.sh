# Processes that live 50 ms, started by a shell (children are followed), are
# still symbolized.
source "$(dirname "$0")/lib.sh"
require_bpf
"$STRATA" record -v -F 999 -o "$T/out.folded" -- sh -c "for i in 1 2 3 4 5 6; do $FIX/shortlived; done"
cat "$T/out.folded" | sort -k2 -n -t' ' | tail -5
total=$(folded_sum "$T/out.folded" shortlived "")
hot=$(folded_sum "$T/out.folded" shortlived ';main;short_hot(;|$)')
# 6 x 50 ms at 999 Hz ~ 300 samples.
[ "$total" -ge 100 ] || fail "only $total samples of shortlived"
assert_ratio "$hot" "$total" 90 "main;short_hot symbolized"
