# A rows map too small for everything: tables of a process that exited are
# evicted (least recently sampled first) to make room for the next one, whose
# stacks are then whole again; evictions are counted.  nofp_chain runs 3 s:
# its first ~0.1-0.2 s (exec seen, maps read, tables built past evictions,
# installed) unwind by frame pointers only, which this binary lacks; at
# 2 s that start alone took 2 runs in 30 under 95%.
source "$(dirname "$0")/lib.sh"
require_bpf
[ -x /usr/bin/python3.11 ] || skip "/usr/bin/python3.11 missing"
"$STRATA" record -v --max-unwind-rows 100000 -F 199 -o "$T/ev.folded" -- sh -c \
	"/usr/bin/python3.11 -c 'import time
t = time.time() + 1
while time.time() < t: pass'; $FIX/nofp_chain 3" 2> "$T/err"
grep -E '^  unwind' "$T/err"
evicted=$(sed -n 's/^  unwind tables: .* evicted=\([0-9]*\) .*/\1/p' "$T/err")
[ "${evicted:-0}" -ge 1 ] || fail "no table was evicted from a 100000-row map"
total=$(folded_sum "$T/ev.folded" nofp_chain "")
full=$(folded_sum "$T/ev.folded" nofp_chain ';main;exe_outer;a_mid;b_leaf(;|$)')
assert_ratio "$full" "$total" 95 "after $evicted evictions, nofp_chain unwinds whole"
