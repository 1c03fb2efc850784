#!/usr/bin/env bash
# Kernel launches counted exactly, with the right kernel names: runtime API
# host stubs (symbolized), driver API handles (cuModuleGetFunction), ex and
# graph launches; syncs recorded.
source "$(dirname "$0")/lib.sh"
require_bpf
# the stand-ins attached from the start, as installed CUDA/NCCL libraries are
# (ld.so cache, /usr/local/cuda): every call seen, no start-up delay needed
# Exact counts: no probe budget (1200 launches in a blink are ~10% of a CPU
# of probes by the budget's estimate: the duty cycle would shed some).
GPU_LIBS=(--gpu-lib "$FIX/libcudart.so" --gpu-lib "$FIX/libcuda.so" --gpu-lib "$FIX/libnccl.so"
	--probe-budget 0)
export SIM_KERNEL_US=5
n=300
# named (its comm) with a quote and a backslash: the trace is still JSON
ln -s "$FIX/gpu_workload" "$T/gpu\"w\\l"
"$STRATA" record "${GPU_LIBS[@]}" --drain-interval 100 -o "$T/p.folded" --tally "$T/tally.txt" \
	--trace "$T/trace.json" -- "$T/gpu\"w\\l" launches $n > "$T/out" 2>&1 ||
	{ cat "$T/out"; fail "strata record failed"; }
cat "$T/tally.txt"
want() { grep -Eq "^$1 +$2 " "$T/tally.txt" || fail "$1: want $2 calls"; }
want cudaLaunchKernel $((3 * n))
want cuLaunchKernel $n
want cudaLaunchKernelExC 1
want cudaGraphLaunch 1
want cudaEventSynchronize 1
want cudaStreamSynchronize 1
want cuModuleGetFunction 1
python3 - "$T/trace.json" $n <<'PY' || fail "trace kernel names"
import json, sys, collections
d = json.load(open(sys.argv[1])); n = int(sys.argv[2])
c = collections.Counter(e["args"].get("kernel_name") for e in d["traceEvents"] if e.get("cat") == "launch")
print(dict(c))
assert c["vector_add_kernel"] == n + 1, c   # + the cudaLaunchKernelExC
assert c["softmax_kernel"] == 2 * n, c
assert c["matmul_tile_kernel"] == n, c
names = [e["args"]["name"] for e in d["traceEvents"] if e.get("name") == "process_name"]
assert any('gpu"w\\l (pid' in x for x in names), names
PY
echo "ok: $((4 * n + 2)) launches with their kernel names"
