# The query API over stored synthetic batches (CPU + CUDA + NCCL, as the
# GPU layer will send them): filters, leaks (outstanding = allocations not
# freed, also by a later window), tallies, collectives (the late rank is
# blamed), Perfetto trace, differential flame graph, HTML job page.  No BPF.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/server_lib.sh"

PORT=$(free_port)
start_server "$PORT"
# Three 10 s windows of an 8-rank job on node-a, one window of another job.
"$GEN" post "http://127.0.0.1:$PORT" --gpu --count 3 --start 1700000000 --node node-a \
	--job job-a --stacks 100 --samples 5000
"$GEN" post "http://127.0.0.1:$PORT" --count 1 --start 1700000100 --node node-b --job job-b \
	--ranks 2 --stacks 50 --samples 1000

api "/api/v1/jobs" > "$T/jobs.json"
api "/api/v1/nodes" > "$T/nodes.json"
api "/api/v1/processes?job=job-a&rank=3" > "$T/rank3.json"
api "/api/v1/leaks?job=job-a" > "$T/leaks.json"
api "/api/v1/leaks?job=job-a&to=1700000005" > "$T/leaks-early.json"
api "/api/v1/tally?job=job-a&rank=2" > "$T/tally.json"
api "/api/v1/collectives?job=job-a" > "$T/coll.json"
api "/api/v1/trace?job=job-a&rank=7" > "$T/trace.json"
api "/api/v1/profile?format=json&job=job-a&from=1700000000&to=1700000010" > "$T/w1.json"
api "/api/v1/profile?format=folded&job=job-a&container=$(printf '%064x' 4)" > "$T/c4.folded"
api "/api/v1/profile/diff?format=json&job=job-a&rank=7&base.rank=!7" > "$T/diff.json"
api "/api/v1/profile/diff?format=svg&job=job-a&rank=7&base.rank=!7" > "$T/diff.svg"
api "/jobs/job-a" > "$T/job.html"
curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/api/v1/profile?rank=x" > "$T/code" || true
[ "$(cat "$T/code")" = 400 ] || fail "bad filter answered $(cat "$T/code")"

python3 - "$T" <<'PY'
import json, sys, xml.dom.minidom
T = sys.argv[1]
def load(n): return json.load(open(f"{T}/{n}"))

jobs = {j["job"]: j for j in load("jobs.json")["jobs"]}
assert jobs["job-a"]["ranks"] == 8 and jobs["job-a"]["cpu_samples"] == 15000, jobs
assert jobs["job-b"]["cpu_samples"] == 1000, jobs
nodes = {n["node"]: n for n in load("nodes.json")["nodes"]}
assert nodes["node-a"]["batches"] == 3 and nodes["node-b"]["batches"] == 1, nodes

r3 = load("rank3.json")["processes"]
assert len(r3) == 1 and r3[0]["rank"] == 3 and r3[0]["world_size"] == 8, r3

# Per rank and window: one 1 MiB allocation stays, one is freed in its
# window, one record only frees an earlier window's allocation.
leaks = load("leaks.json")["outstanding"]
assert len(leaks) == 8 and all(l["bytes"] == 3 * (1 << 20) and l["allocations"] == 3 for l in leaks), leaks
# At 5 s into the first window only its allocation was outstanding.
early = load("leaks-early.json")["outstanding"]
assert sum(l["allocations"] for l in early) == 8, early

tally = load("tally.json")["tally"]
assert len(tally) == 1 and tally[0]["calls"] == 30 and tally[0]["max_ns"] == 200000, tally
assert tally[0]["errors"] == [{"code": 2, "name": "cudaErrorMemoryAllocation", "count": 3}], tally

comms = load("coll.json")["communicators"]
assert len(comms) == 1 and comms[0]["nranks"] == 8
ranks = {r["rank"]: r for r in comms[0]["ranks"]}
assert ranks[7]["last_arrivals"] == 15 and all(ranks[r]["last_arrivals"] == 0 for r in range(7)), ranks
assert ranks[7]["wait_caused_ns"] == 15 * 50000000, ranks[7]

tr = load("trace.json")
ev = tr["traceEvents"]
cats = {e.get("cat") for e in ev if e["ph"] == "X"}
assert cats == {"nccl", "cuda_sync", "cuda_launch"}, cats
assert all(e["pid"] == 7 for e in ev), "rank filter leaked other ranks"
assert any(e["ph"] == "M" and "rank 7" in e["args"]["name"] for e in ev)

w1 = load("w1.json")
total = sum(s["count"] for s in w1["samples"])
assert total == 5000, f"first window only: {total}"

# Container 4 is rank 3's: only its samples.
c4 = [l for l in open(f"{T}/c4.folded").read().split("\n") if l]
r3_samples = r3[0]["cpu_samples"]
assert r3_samples > 0 and sum(int(l.rsplit(" ", 1)[1]) for l in c4) == r3_samples, (len(c4), r3_samples)
d = load("diff.json")
assert d["selection_total"] > 0 and d["base_total"] > d["selection_total"], d
assert sum(s["selection"] for s in d["stacks"]) == d["selection_total"], "diff loses samples"
assert sum(s["base"] for s in d["stacks"]) == d["base_total"]
xml.dom.minidom.parse(f"{T}/diff.svg")

html = open(f"{T}/job.html").read()
assert "<svg" in html and "Ranks" in html and "Outstanding GPU memory" in html
for bad in ("<script src", "<link ", "@import", "src=\"http"):
    assert bad not in html, f"external asset: {bad}"
print("ok: jobs, nodes, ranks, leaks, tally, collectives, trace, time/rank/container filters, diff, page")
PY
