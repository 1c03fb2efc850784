#!/usr/bin/env bash
# 4-rank allreduce loop (ranks are processes over a shared-memory barrier):
# every rank's collectives carry sequence numbers 0..N-1, one communicator
# identity shared by all ranks, the rank/nranks from ncclCommInitRank (or
# ncclCommInitRankScalable), and RANK/WORLD_SIZE from the environment;
# per-collective stats are tallied.
source "$(dirname "$0")/lib.sh"
require_bpf
# the stand-ins attached from the start, as installed CUDA/NCCL libraries are
# (ld.so cache, /usr/local/cuda): every call seen, no start-up delay needed
GPU_LIBS=(--gpu-lib "$FIX/libcudart.so" --gpu-lib "$FIX/libcuda.so" --gpu-lib "$FIX/libnccl.so")
export SIM_KERNEL_US=20
steps=15
# INIT (the API the ranks make their communicator with; SIM_NCCL_INIT for
# train_sim): the job's records, checked
nccl_job() {
	local init=$1
	SIM_NCCL_INIT=$([ "$init" = ncclCommInitRankScalable ] && echo scalable) \
		"$STRATA" record "${GPU_LIBS[@]}" --drain-interval 100 -o "$T/p.folded" \
		--tally "$T/tally.txt" --trace "$T/trace.json" -- "$FIX/train_sim" 4 $steps \
		> "$T/out" 2>&1 || { cat "$T/out"; fail "$init: strata record failed"; }
	grep -Eq "^ncclAllReduce +$((4 * steps)) " "$T/tally.txt" ||
		{ cat "$T/tally.txt"; fail "$init: allreduce count"; }
	grep -Eq "^$init +4 " "$T/tally.txt" || { cat "$T/tally.txt"; fail "$init: comm init count"; }
	python3 - "$T/trace.json" $steps <<'PY' || fail "$init: NCCL records"
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
	echo "ok: $init: 4 ranks, $steps allreduces each"
}
nccl_job ncclCommInitRank
# Large jobs spread the bootstrap over several unique ids
# (ncclCommInitRankScalable): the first one names the communicator.
nccl_job ncclCommInitRankScalable

# A call whose return never comes (SIM_ESCAPE_EVERY: the stream sync before
# the all-reduce is left by siglongjmp, as an exception unwinding through the
# runtime leaves it, or as any call looks when the duty cycle detaches its
# return probe mid-call) leaves an entry that never ends, above the
# 7-argument ncclAllReduce that follows (its stack argument lowers the stack
# pointer).  That entry must not make the collective look nested inside it:
# sequence numbers stay exact on every rank, and the launches of the next
# steps are all seen.
export SIM_KERNEL_US=1000 SIM_KERNELS=4 SIM_ESCAPE_EVERY=5
steps=40
"$STRATA" record "${GPU_LIBS[@]}" --probe-budget 0 --drain-interval 100 -o "$T/d.folded" \
	--tally "$T/dtally.txt" --trace "$T/dtrace.json" -- "$FIX/train_sim" 4 $steps > "$T/dout" 2>&1 ||
	{ cat "$T/dout"; fail "strata record (escaping syncs) failed"; }
grep -Eq "^ncclAllReduce +$((4 * steps)) " "$T/dtally.txt" ||
	{ cat "$T/dtally.txt"; fail "allreduce count with escaping syncs"; }
grep -Eq "^cudaLaunchKernel +$((4 * steps * 2 * SIM_KERNELS)) " "$T/dtally.txt" ||
	{ cat "$T/dtally.txt"; fail "launch count with escaping syncs"; }
python3 - "$T/dtrace.json" $steps <<'PY' || fail "NCCL sequence with escaping syncs"
import json, sys, collections
d = json.load(open(sys.argv[1])); steps = int(sys.argv[2])
by = collections.defaultdict(list)
for e in d["traceEvents"]:
    if e.get("name") == "ncclAllReduce":
        by[e["pid"]].append(e["args"]["seq"])
assert len(by) == 4, by.keys()
for pid, seqs in by.items():
    assert seqs == list(range(steps)), (pid, len(seqs), [s for i, s in enumerate(seqs) if s != i][:5])
PY
echo "ok: a stream sync left by siglongjmp every 5 steps, $steps allreduces each, sequence exact"
