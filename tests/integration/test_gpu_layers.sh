#!/usr/bin/env bash
# The GPU uprobes mark the scheduler layer's per-thread API layer: time a
# rank spends inside cudaStreamSynchronize counts as gpu_wait, inside
# ncclAllReduce as collective (docs/diagnosis.md).  Two ranks, rank 1's
# kernels 4x slower: per step rank 1 waits ~16 x 8 ms on its stream, rank 0
# ~16 x 2 ms on its stream and then ~96 ms in the allreduce for rank 1.
source "$(dirname "$0")/lib.sh"
require_bpf
export SIM_KERNEL_US=2000 SIM_SLOW_RANK=1 SIM_SLOWDOWN=4 SIM_KERNELS=8
steps=10
"$STRATA" record --gpu-lib "$FIX/libcudart.so" --gpu-lib "$FIX/libcuda.so" \
	--gpu-lib "$FIX/libnccl.so" --sched "$T/s.json" -o "$T/s.folded" \
	-- "$FIX/train_sim" 2 $steps > "$T/out" 2>&1 || { cat "$T/out"; fail "strata record failed"; }
python3 - "$T/s.json" $steps <<'PY' || fail "API-layer breakdown"
import json, sys
d = json.load(open(sys.argv[1])); steps = int(sys.argv[2])
ranks = [t for t in d["threads"] if t["comm"] == "train_sim" and t["time_ns"]["cuda_api"] > 0]
assert len(ranks) == 2, [(t["comm"], t["time_ns"]) for t in d["threads"]]
ms = lambda t, k: t["time_ns"][k] / 1e6
slow = max(ranks, key=lambda t: ms(t, "gpu_wait"))
fast = min(ranks, key=lambda t: ms(t, "gpu_wait"))
for name, t in (("slow", slow), ("fast", fast)):
    print(name, {k: round(v / 1e6, 1) for k, v in t["time_ns"].items()})
want_slow = steps * 16 * 8.0       # ms of stream waits on rank 1
want_fast_wait = steps * 16 * 2.0  # on rank 0
want_fast_coll = want_slow - want_fast_wait
assert ms(slow, "gpu_wait") >= 0.8 * want_slow, "slow rank gpu_wait"
assert ms(slow, "collective") <= 0.25 * want_slow, "slow rank collective"
assert 0.8 * want_fast_wait <= ms(fast, "gpu_wait") <= 1.6 * want_fast_wait, "fast rank gpu_wait"
assert ms(fast, "collective") >= 0.7 * want_fast_coll, "fast rank collective"
PY
echo "ok: stream syncs counted as gpu_wait, the allreduce wait as collective"
