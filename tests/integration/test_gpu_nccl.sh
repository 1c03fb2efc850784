#!/usr/bin/env bash
# 4-rank allreduce loop (ranks are processes over a shared-memory barrier):
# every rank's collectives carry sequence numbers 0..N-1, one communicator
# identity shared by all ranks, the rank/nranks from ncclCommInitRank, and
# RANK/WORLD_SIZE from the environment; per-collective stats are tallied.
source "$(dirname "$0")/lib.sh"
require_bpf
# the stand-ins attached from the start, as installed CUDA/NCCL libraries are
# (ld.so cache, /usr/local/cuda): every call seen, no start-up delay needed
GPU_LIBS=(--gpu-lib "$FIX/libcudart.so" --gpu-lib "$FIX/libcuda.so" --gpu-lib "$FIX/libnccl.so")
export SIM_KERNEL_US=20
steps=15
"$STRATA" record "${GPU_LIBS[@]}" --drain-interval 100 -o "$T/p.folded" --tally "$T/tally.txt" \
	--trace "$T/trace.json" -- "$FIX/train_sim" 4 $steps > "$T/out" 2>&1 ||
	{ cat "$T/out"; fail "strata record failed"; }
grep -Eq "^ncclAllReduce +$((4 * steps)) " "$T/tally.txt" || { cat "$T/tally.txt"; fail "allreduce count"; }
grep -Eq "^ncclCommInitRank +4 " "$T/tally.txt" || fail "comm init count"
python3 - "$T/trace.json" $steps <<'PY' || fail "NCCL records"
import json, sys, collections
d = json.load(open(sys.argv[1])); steps = int(sys.argv[2])
ev = [e for e in d["traceEvents"] if e.get("name") == "ncclAllReduce"]
by = collections.defaultdict(list)
for e in ev:
    by[e["pid"]].append(e["args"])
assert len(by) == 4, by.keys()
comms = {a["comm"] for v in by.values() for a in v}
assert len(comms) == 1, comms
ranks = set()
for pid, v in by.items():
    seqs = [a["seq"] for a in v]
    assert seqs == list(range(steps)), (pid, seqs)
    assert all(a["nranks"] == 4 and a["bytes"] == 4 * (4 << 18) for a in v), v[0]
    ranks.add(v[0]["rank"])
assert ranks == {0, 1, 2, 3}, ranks
names = [e["args"]["name"] for e in d["traceEvents"] if e.get("name") == "process_name"]
assert sum(n.startswith("rank ") for n in names) == 4, names
print("comm", comms.pop(), "ranks", sorted(ranks), "seq 0..%d on each" % (steps - 1))
PY
echo "ok: 4 ranks, $steps allreduces each"
