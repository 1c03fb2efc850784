#!/usr/bin/env bash
# GPU leak report on stand-in CUDA libraries built like NVIDIA's (-O2, no
# frame pointers, thin API entry points), called from a program without
# frame pointers.  One call site (leaky_site) never frees: it must be the
# top outstanding stack with the right bytes and the whole chain, every
# frame in order (API <- leaky_site <- run_leak <- main), whichever way
# the API is reached: the runtime through the PLT, the runtime through a
# function pointer, the driver API, and a runtime linked into the program.
# The failed 1 PiB allocation is counted, not a leak.  Then one allocation
# site reached from two callers three frames up: the call-site cache must
# give each its own stack (and be used).
source "$(dirname "$0")/lib.sh"
require_bpf
# the stand-ins attached from the start, as installed CUDA/NCCL libraries are
# (ld.so cache, /usr/local/cuda): every call seen, no start-up delay needed
# Exact counts: no probe budget (the duty cycle may shed allocation probes
# for a while when calls come in a burst).
GPU_LIBS=(--gpu-lib "$FIX/libcudart.so" --gpu-lib "$FIX/libcuda.so" --gpu-lib "$FIX/libnccl.so"
	--probe-budget 0)
# Creating a CUDA context takes 100+ ms; the stand-in's first call takes as
# long here.  strata loads the process's unwind tables when it sees that
# first call: calls walked before (no tables yet) get only the frames the
# entry rule and frame pointers give.
export SIM_INIT_MS=300
# Under emulation (the kernel VMs, tests/vm) the agent runs 10-20x slower
# while the stand-in's sleep does not: the context creation is scaled the
# same, or the tables come after every call (seen on 6.12 under TCG: 21 of
# 25 allocations walked before them, cuMemAlloc_v2 <- leaky_site)
[ "${STRATA_VM_ACCEL:-}" = tcg ] && SIM_INIT_MS=3000

# label, mode, binary, API name, extra strata args
check_chain() {
	local what=$1 mode=$2 bin=$3 api=$4 top bytes count
	shift 4
	"$STRATA" record "${GPU_LIBS[@]}" "$@" --drain-interval 100 -o "$T/p.folded" \
		--leaks "$T/leaks.$what.txt" --tally "$T/tally.$what.txt" -- "$bin" "$mode" 25 \
		> "$T/out" 2>&1 || { cat "$T/out"; fail "$what: strata record failed"; }
	cat "$T/leaks.$what.txt"
	top=$(awk 'NR == 3' "$T/leaks.$what.txt")
	echo "$top" | grep -Eq " $api <- leaky_site <- run_leak <- main( <- |$)" ||
		fail "$what: top outstanding stack is not $api <- leaky_site <- run_leak <- main: $top"
	bytes=$(echo "$top" | awk '{print $1}') count=$(echo "$top" | awk '{print $2}')
	[ "$bytes" -eq $((25 << 20)) ] || fail "$what: leaked bytes $bytes, want $((25 << 20))"
	[ "$count" -eq 25 ] || fail "$what: leaked allocations $count, want 25"
	grep -q 'balanced_site' "$T/leaks.$what.txt" &&
		fail "$what: balanced_site (always freed) reported as a leak"
	grep -Eq "^$api +51 " "$T/tally.$what.txt" || fail "$what: $api calls != 51"
	echo "ok: $what: $api <- leaky_site <- run_leak <- main, $bytes bytes in $count allocations"
}
check_chain runtime-plt leak "$FIX/gpu_workload" cudaMalloc
check_chain runtime-fnptr leak_fnptr "$FIX/gpu_workload" cudaMalloc
check_chain driver leak_driver "$FIX/gpu_workload" 'cuMemAlloc(_v2)?'
check_chain static-runtime leak "$FIX/gpu_workload_static" cudaMalloc \
	--gpu-lib "$FIX/gpu_workload_static"
grep -Eq '^cudaMalloc +.*cudaErrorMemoryAllocation +1$' "$T/tally.runtime-plt.txt" ||
	{ cat "$T/tally.runtime-plt.txt"; fail "failed allocation not tallied by return code"; }

# the same site from path_a and path_b (3 calls each per round, 10 rounds)
"$STRATA" record -v "${GPU_LIBS[@]}" --drain-interval 100 -o "$T/p.folded" \
	--leaks "$T/callers.txt" -- "$FIX/gpu_workload" leak_callers 10 > "$T/out" 2>&1 ||
	{ cat "$T/out"; fail "leak_callers: strata record failed"; }
cat "$T/callers.txt"
for p in path_a path_b; do
	grep -Eq "^ +31457280 +30 .* cudaMalloc <- alloc_common <- via_mid <- $p <- run_callers <- main" \
		"$T/callers.txt" || fail "leak_callers: $p's 30 allocations not on its own stack"
done
reused=$(grep -o 'stacks_reused=[0-9]*' "$T/out" | cut -d= -f2)
grep -E '^  (gpu\.bpf|gpu\.unwind|gpu: links|procs|unwind tables):' "$T/out"
# A walk that fell back for want of a table is not cached (the table may
# come): stacks that stop short of _start say libc's never came.
[ "${reused:-0}" -gt 0 ] || { grep -q ' <- _start$' "$T/callers.txt" ||
	fail "leak_callers: the stacks stop short of _start (no libc table: every walk partial)"
fail "leak_callers: the call-site cache was never used"; }
echo "ok: two callers, two stacks (30 allocations each), $reused stacks reused"

"$STRATA" record "${GPU_LIBS[@]}" --drain-interval 100 -o "$T/p.folded" --leaks "$T/leaks.pb.gz" \
	-- "$FIX/gpu_workload" leak 25 > "$T/out" 2>&1 || { cat "$T/out"; fail "pprof record failed"; }
if command -v go > /dev/null; then
	go tool pprof -top -sample_index=inuse_space "$T/leaks.pb.gz" > "$T/top" 2>&1 ||
		{ cat "$T/top"; fail "go tool pprof cannot read the heap profile"; }
	cat "$T/top"
	grep -q 'leaky_site' "$T/top" || fail "pprof heap profile lacks leaky_site"
	grep -q '25MB' "$T/top" || fail "pprof inuse_space is not 25MB"
else
	echo "go not installed: pprof readability not checked"
fi
