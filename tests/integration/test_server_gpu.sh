# The GPU layer through agent -> server -> query API (strata-agent has it on
# by default).  gpu_workload leak: /api/v1/leaks has leaky_site's stack on
# top with 25 x 1 MiB outstanding (symbolized centrally from the agent's
# (build-id, offset) frames), balanced_site not at all; /api/v1/tally counts
# the calls and the failed 1 PiB allocation by code.  train_sim 4 ranks:
# /api/v1/collectives shows one communicator with 4 ranks whose sequence
# numbers match; /api/v1/trace has the collectives per rank; processes carry
# the rank identity even when a rank exits before the agent reads its
# environment (the rank then comes from its ncclCommInitRank call).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/server_lib.sh"
require_bpf
export SIM_INIT_MS=400 SIM_KERNEL_US=20
steps=15

PORT=$(free_port)
start_server "$PORT"
# The job: a shell that waits for the agent, then runs both workloads.  The
# agent follows it (--pid: the shell and its children, from exec on), so
# discovery does not depend on a first CPU sample (host-wide discovery is
# the GPU layer's own concern, docs/gpu.md).  Drains every 100 ms: the
# layer resolves call-site stacks at a drain while the process lives.
mkfifo "$T/go"
bash -c 'read -r _ < "$1"
	"$2/gpu_workload" leak 25 > "$3/leak.out" & echo $! > "$3/leak.pid"
	wait $! || exit 1
	"$2/train_sim" 4 '$steps' > "$3/train.out" 2>&1' _ "$T/go" "$FIX" "$T" &
JOB_PID=$!
"$AGENT" --server "http://127.0.0.1:$PORT" --period 1 -F 49 --spool "$T/spool" \
	--node gpu-node --pid "$JOB_PID" --drain-interval 100 -v 2> "$T/agent.log" &
AGENT_PID=$!
wait_agent_ready "$T/agent.log"
echo go > "$T/go"
wait "$JOB_PID" || fail "workloads failed: $(cat "$T"/*.out)"
LEAK_PID=$(cat "$T/leak.pid")
sleep 2.5 # the last period, then its upload
kill -INT "$AGENT_PID"
wait "$AGENT_PID" || fail "agent exited with an error: $(tail -5 "$T/agent.log")"
AGENT_PID=
grep -E 'batches:|upload:' "$T/agent.log" | tail -2
# the rows of exited processes go once a batch told their exit (an
# always-on agent keeps none for every process it ever traced): the leak
# process exited seconds before the agent stopped
gpu_line=$(grep 'gpu: links=' "$T/agent.log" | tail -1)
pruned=$(echo "$gpu_line" | sed -n 's/.* procs_pruned=\([0-9]*\) .*/\1/p')
[ "${pruned:-0}" -ge 1 ] || fail "no exited process's row dropped: $gpu_line"
# ... and every table's rows of those processes (call sites, tally, stacks,
# leak groups: gpu_retire.c); the leak and tally checks below read them
# back from the server, so what was let go had been shipped
retired=$(echo "$gpu_line" | sed -n 's/.* rows_retired=\([0-9]*\) .*/\1/p')
[ "${retired:-0}" -ge "$((pruned * 3))" ] || fail "$pruned processes let go, $retired rows: $gpu_line"
echo "ok: rows of exited processes dropped: $(echo "$gpu_line" | grep -o 'procs_kept=[0-9]* procs_pruned=[0-9]* rows_retired=[0-9]*')"

api "/api/v1/leaks?pid=$LEAK_PID" > "$T/leaks.json"
api "/api/v1/tally?pid=$LEAK_PID" > "$T/tally.json"
python3 - "$T/leaks.json" "$T/tally.json" <<'PY' || fail "leaks / tally through the server"
import json, sys
out = json.load(open(sys.argv[1]))["outstanding"]
assert out, "no outstanding allocations"
top = out[0]
print("top:", top["bytes"], top["allocations"], top["stack"][-4:])
assert any("leaky_site" in f for f in top["stack"]), top["stack"]
assert top["bytes"] == 25 << 20 and top["allocations"] == 25, top
assert not any("balanced_site" in f for o in out for f in o["stack"]), out
tally = {t["fn"]: t for t in json.load(open(sys.argv[2]))["tally"]}
m = tally["cudaMalloc"]
assert m["calls"] == 51, m
codes = {c["name"]: c["count"] for c in m["errors"]}
assert codes.get("cudaErrorMemoryAllocation") == 1, m
assert tally["cudaLaunchKernel"]["calls"] >= 25, tally["cudaLaunchKernel"]
print("ok: leak at leaky_site, cudaMalloc 51 calls, 1 cudaErrorMemoryAllocation")
PY

api "/api/v1/collectives" > "$T/coll.json"
api "/api/v1/trace" > "$T/trace.json"
api "/api/v1/processes" > "$T/procs.json"
# on a failure, what the agent saw: exits, communicators unknown or recovered
nccl_failed() {
	grep -E 'gpu\.bpf|gpu: links|gpu nccl recovered|tracing pid|warn' "$T/agent.log"
	fail "NCCL through the server"
}
python3 - "$T/coll.json" "$T/trace.json" "$T/procs.json" $steps <<'PY' || nccl_failed
import json, sys, collections
steps = int(sys.argv[4])
comms = json.load(open(sys.argv[1]))["communicators"]
assert len(comms) == 1, comms
c = comms[0]
assert c["nranks"] == 4 and sorted(r["rank"] for r in c["ranks"]) == [0, 1, 2, 3], c
for r in c["ranks"]:
    assert r["collectives"] == steps, r
print("ok: one communicator, ranks 0-3, %d collectives each" % steps)
ev = [e for e in json.load(open(sys.argv[2]))["traceEvents"] if e.get("cat") == "nccl"]
by = collections.defaultdict(list)
for e in ev:
    by[e["pid"]].append(e["args"]["seq"])
assert len(by) == 4, by.keys()
for pid, seqs in by.items():
    assert sorted(seqs) == list(range(steps)), (pid, sorted(seqs))
print("ok: trace has seqs 0..%d on each of 4 ranks" % (steps - 1))
procs = json.load(open(sys.argv[3]))["processes"]
ranked = {p["rank"] for p in procs if p.get("rank") is not None and "train_sim" in p.get("comm", "")}
assert ranked >= {0, 1, 2, 3}, procs
print("ok: train_sim processes carry ranks", sorted(ranked))
# every rank is labelled from its ncclCommInitRank (the job is the
# communicator's), whether or not its environment could be read
jobs = {p["job"] for p in procs if p.get("rank") is not None and "train_sim" in p.get("comm", "")}
assert len(jobs) == 1 and next(iter(jobs)).startswith("nccl-"), jobs
print("ok: all ranks in job", jobs.pop())
PY
