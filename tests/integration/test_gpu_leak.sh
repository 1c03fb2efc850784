#!/usr/bin/env bash
# GPU leak report: one call site (leaky_site) never frees; it must be the
# top outstanding stack, with the right bytes, in the text table and in the
# pprof heap profile; the failed 1 PiB allocation is counted, not a leak.
source "$(dirname "$0")/lib.sh"
require_bpf
# the stand-ins attached from the start, as installed CUDA/NCCL libraries are
# (ld.so cache, /usr/local/cuda): every call seen, no start-up delay needed
GPU_LIBS=(--gpu-lib "$FIX/libcudart.so" --gpu-lib "$FIX/libcuda.so" --gpu-lib "$FIX/libnccl.so")
"$STRATA" record "${GPU_LIBS[@]}" --drain-interval 100 -o "$T/p.folded" --leaks "$T/leaks.txt" \
	--tally "$T/tally.txt" -- "$FIX/gpu_workload" leak 25 > "$T/out" 2>&1 ||
	{ cat "$T/out"; fail "strata record failed"; }
"$STRATA" record "${GPU_LIBS[@]}" --drain-interval 100 -o "$T/p.folded" --leaks "$T/leaks.pb.gz" \
	-- "$FIX/gpu_workload" leak 25 >> "$T/out" 2>&1 || { cat "$T/out"; fail "second record failed"; }
cat "$T/leaks.txt"
top=$(awk 'NR == 3' "$T/leaks.txt")
echo "$top" | grep -q "cudaMalloc <- leaky_site <- run_leak <- main" ||
	fail "top outstanding stack is not cudaMalloc <- leaky_site <- run_leak <- main: $top"
bytes=$(echo "$top" | awk '{print $1}') count=$(echo "$top" | awk '{print $2}')
[ "$bytes" -eq $((25 << 20)) ] || fail "leaked bytes $bytes, want $((25 << 20))"
[ "$count" -eq 25 ] || fail "leaked allocations $count, want 25"
grep -q 'balanced_site' "$T/leaks.txt" && fail "balanced_site (always freed) reported as a leak"
grep -Eq '^cudaMalloc +.*cudaErrorMemoryAllocation +1$' "$T/tally.txt" ||
	{ cat "$T/tally.txt"; fail "failed allocation not tallied by return code"; }
grep -Eq '^cudaMalloc +51 ' "$T/tally.txt" || fail "cudaMalloc calls != 51"
if command -v go > /dev/null; then
	go tool pprof -top -sample_index=inuse_space "$T/leaks.pb.gz" > "$T/top" 2>&1 ||
		{ cat "$T/top"; fail "go tool pprof cannot read the heap profile"; }
	cat "$T/top"
	grep -q 'leaky_site' "$T/top" || fail "pprof heap profile lacks leaky_site"
	grep -q '25MB' "$T/top" || fail "pprof inuse_space is not 25MB"
else
	echo "go not installed: pprof readability not checked"
fi
echo "ok: leak at leaky_site: $bytes bytes in $count allocations"
