# Hybrid unwinding: a chain across the executable and two shared libraries,
# all built -O2 -fomit-frame-pointer with the hot leaf in the last library,
# comes out whole in >= 95% of samples; time inside Debian's libc (no frame
# pointers) calling back into the program unwinds through libc to main.
# A frame-pointer-only run of the same workload is printed for contrast.
source "$(dirname "$0")/lib.sh"
require_bpf
"$STRATA" record -v --unwind hybrid -F 199 -o "$T/h.folded" -- "$FIX/nofp_chain" 3 2> "$T/err"
grep -E '^  unwind' "$T/err" || true
head -4 "$T/h.folded"
total=$(folded_sum "$T/h.folded" nofp_chain "")
full=$(folded_sum "$T/h.folded" nofp_chain ';main;exe_outer;a_mid;b_leaf(;|$)')
"$STRATA" record --unwind fp -F 199 -o "$T/fp.folded" -- "$FIX/nofp_chain" 1 2>/dev/null
fp_total=$(folded_sum "$T/fp.folded" nofp_chain "")
fp_full=$(folded_sum "$T/fp.folded" nofp_chain ';main;exe_outer;a_mid;b_leaf(;|$)')
echo "frame pointers only: $fp_full of $fp_total samples carry the chain"
# Under emulation (the TCG VM of test_vm_kernels) the process runs 10-20x
# slower until user space has built and loaded its tables: a few more of
# its first samples are frame-pointer guesses.
want=95
[ "${STRATA_VM_ACCEL:-}" = tcg ] && want=90
assert_ratio "$full" "$total" "$want" "hybrid: main;exe_outer;a_mid;b_leaf across exe + 2 libraries"

"$STRATA" record --unwind hybrid -F 199 -o "$T/q.folded" -- "$FIX/qsort_cb" 2 2>/dev/null
sort -t' ' -k2 -nr "$T/q.folded" | awk 'NR <= 3 { print substr($0, 1, 200) }'
# Samples inside the comparator or libc's sort: all must reach main.
insort=$(folded_sum "$T/q.folded" qsort_cb '(by_value|msort|qsort)')
tomain=$(folded_sum "$T/q.folded" qsort_cb ';main;sort_rounds;.*(by_value|msort|qsort)')
assert_ratio "$tomain" "$insort" 95 "qsort callback unwinds through libc to main;sort_rounds"

# Hot code inside a signal handler: the stack crosses the kernel-made signal
# frame (glibc's __restore_rt, a CFA read from the saved context) back into
# the interrupted function and on to main.
"$STRATA" record -F 199 -o "$T/s.folded" -- "$FIX/sigframe" 2 2>/dev/null
inhandler=$(folded_sum "$T/s.folded" sigframe ';handler_hot(;|$)')
through=$(folded_sum "$T/s.folded" sigframe '^sigframe;_start;.*;main;interrupted_work;[^;]*;on_alarm;handler_hot(;|$)')
assert_ratio "$through" "$inhandler" 95 "signal handler unwinds through the signal frame to main"

# Time inside the vDSO: named (__vdso_clock_gettime) and unwound to main.
"$STRATA" record -F 199 -o "$T/v.folded" -- "$FIX/vdso_loop" 2 2>/dev/null
invdso=$(folded_sum "$T/v.folded" vdso_loop ';__vdso_clock_gettime(;|$)')
whole=$(folded_sum "$T/v.folded" vdso_loop '^vdso_loop;_start;.*;main;spin_clock;.*__vdso_clock_gettime(;|$)')
[ "$invdso" -ge 100 ] || fail "only $invdso samples named __vdso_clock_gettime"
assert_ratio "$whole" "$invdso" 95 "vDSO frames named and unwound to main"
