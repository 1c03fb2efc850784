# Scenario: triggered deep capture (docs/diagnosis.md "Deep capture"), the
# real pipeline as deployed (scenario_lib.sh: strata-server with its
# defaults, strata-agent with the DaemonSet's arguments, host-wide, the
# 4-rank train_sim job on the stand-in CUDA/NCCL).
#  1. POST /api/v1/captures for the job (6 s, 199 Hz, every GPU call): the
#     agent learns of it in the answer to its next batch, starts it at the
#     capture's start (the server's lead: one period) and ends it on time;
#     GET /api/v1/captures/ID/trace is one Perfetto trace with every rank's
#     timed CPU samples (at about the capture's rate), GPU calls (kernel
#     launches with their names, every one: the duty cycle is held) and
#     collectives, all inside the capture's range, on one clock; outside
#     it no timed sample is recorded.
#  2. A second capture, then strata-server is killed after its start: the
#     agent still ends it on its own clock (its CaptureRun, spooled and
#     delivered when the server is back, says when and why), and no timed
#     sample comes after its end.
#  3. A CUDA allocation fails for lack of device memory (gpu_workload leak:
#     its last allocation asks for 1 PiB): the agent starts a capture of
#     its own, sends the process's recent allocations with it, and the
#     server records it (trigger oom) with those calls in its trace.
source "$(dirname "$0")/scenario_lib.sh"
scenario_start

auth=(-H "Authorization: Bearer $TOKEN")
post() { curl -sf "${auth[@]}" -X POST "http://127.0.0.1:$PORT$1"; }

# The job's four ranks are known to the server (their first batches).
for _ in $(seq 60); do
	n=$(api "/api/v1/ranks?job=$SCEN_JOB" | python3 -c 'import json,sys; print(len({p["rank"] for p in json.load(sys.stdin)["processes"] if p.get("rank") is not None}))' 2> /dev/null || echo 0)
	[ "$n" -ge 4 ] && break
	sleep 1
done
[ "$n" -ge 4 ] || fail "the server knows $n ranks of $SCEN_JOB"
# The agent's first batches are followed by its symbol uploads (one sender
# thread: the next answer, which brings orders, waits for them): past its
# third batch they are done.
for _ in $(seq 60); do
	b=$(api /api/v1/nodes | python3 -c 'import json,sys; print(max([n["batches"] for n in json.load(sys.stdin)["nodes"] if n["node"] == "scen-node"] or [0]))' 2> /dev/null || echo 0)
	[ "$b" -ge 3 ] && break
	sleep 1
done

# --- 1. a capture through the API ---------------------------------------------
post "/api/v1/captures?job=$SCEN_JOB&duration_s=6&freq=199" > "$T/cap1.json" ||
	fail "POST /api/v1/captures"
ID1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/cap1.json")
echo "capture 1: $(cat "$T/cap1.json")"
api "/api/v1/captures?job=$SCEN_JOB" | grep -c "$ID1" > /dev/null || fail "capture not listed"
api "/jobs/$SCEN_JOB" | grep -c "/api/v1/captures/$ID1/trace" > /dev/null || fail "job page lacks the trace link"

# Its end, then the agent's batch that says so (one period).
wait_run_end() { # ID: until the agent reports the capture ended
	for _ in $(seq 90); do
		api "/api/v1/captures/$1" > "$T/run.json" 2> /dev/null &&
			python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"]; sys.exit(0 if r and all(x["end_ns"] for x in r) else 1)' "$T/run.json" &&
			return 0
		sleep 1
	done
	cat "$T/run.json"
	tail -n 20 "$T/agent.log"
	fail "capture $1 never reported ended"
}
wait_run_end "$ID1"
sleep 11 # the window holding its last samples and calls
api "/api/v1/captures/$ID1" > "$T/cap1_runs.json"
api "/api/v1/captures/$ID1/trace" > "$T/trace1.json" || fail "GET trace"
python3 - "$T/cap1_runs.json" "$T/trace1.json" << 'PY' || fail "capture 1"
import json, sys
cap = json.load(open(sys.argv[1]))
tr = json.load(open(sys.argv[2]))
start, end = cap["start_ns"], cap["end_ns"]
runs = cap["runs"]
assert len(runs) == 1, runs
r = runs[0]
# started within a second of the capture's start, ended within a second of its end
assert abs(r["start_ns"] - start) < 1.5e9, (r["start_ns"] - start) / 1e9
assert 0 <= r["end_ns"] - end < 1.5e9, (r["end_ns"] - end) / 1e9
assert r["end_reason"] == "end", r
assert r["processes"] >= 4 and r["samples"] > 0 and r["gpu_calls"] > 0, r
ev = tr["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
ranks = {p for p, n in names.items() if n.startswith("rank ")}
assert ranks == {0, 1, 2, 3}, names
per = {p: {"cpu": 0, "launch": 0, "nccl": 0} for p in ranks}
lo, hi = start / 1e3 - 1, end / 1e3 + 20000
for e in ev:
    if e["ph"] in ("B", "X") and e["pid"] in per:
        assert lo <= e["ts"] <= hi, (e, lo, hi)
    if e["ph"] == "B" and e["pid"] in per and e.get("cat") == "cpu":
        per[e["pid"]]["cpu"] += 1
    if e["ph"] == "X" and e["pid"] in per and e.get("cat") in ("launch", "nccl"):
        per[e["pid"]][e["cat"]] += 1
assert sum(1 for e in ev if e["ph"] == "B") == sum(1 for e in ev if e["ph"] == "E"), "unbalanced slices"
kernels = {e["args"].get("kernel") for e in ev if e.get("cat") == "launch"}
print("per rank:", per, "kernels:", sorted(k for k in kernels if k)[:4])
for p, c in per.items():
    assert c["cpu"] > 0 and c["launch"] > 0 and c["nccl"] > 0, (p, c)
od = tr["otherData"]
assert od["capture"] == cap["id"] and od["cpu_samples"] > 0 and not od["truncated"], od
# every step launches SIM_KERNELS kernels: each rank's launches ~ its collectives x 16
for p, c in per.items():
    assert c["launch"] >= 8 * c["nccl"], ("duty cycle not held?", p, c)
print("ok: capture 1: run %.3f s after start, ended %.3f s after end; %d timed samples"
      % ((r["start_ns"] - start) / 1e9, (r["end_ns"] - end) / 1e9, od["cpu_samples"]))
PY

# --- 2. the server goes away during a capture -------------------------------------
post "/api/v1/captures?job=$SCEN_JOB&duration_s=8&freq=99&gpu_calls=0" > "$T/cap2.json" ||
	fail "POST capture 2"
ID2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/cap2.json")
START2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["start_ns"])' "$T/cap2.json")
END2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end_ns"])' "$T/cap2.json")
# after it started (the agent heard of it before: the lead is one period)
while [ "$(date +%s%N)" -lt $((START2 + 2000000000)) ]; do sleep 0.2; done
grep -q "capture $ID2: started" "$T/agent.log" || fail "capture 2 did not start: $(tail -n 5 "$T/agent.log")"
kill -KILL "$SRV_PID"
wait "$SRV_PID" 2> /dev/null || true
SRV_PID=
echo "server killed $((($(date +%s%N) - START2) / 1000000)) ms into capture 2"
while [ "$(date +%s%N)" -lt $((END2 + 3000000000)) ]; do sleep 0.2; done
grep -q "capture $ID2: ended (end)" "$T/agent.log" || fail "capture 2 not ended on time without the server"
start_server "$PORT" --token-file "$T/token" --alert-webhook "http://127.0.0.1:$HOOK_PORT/hook"
wait_run_end "$ID2"
api "/api/v1/captures/$ID2" > "$T/cap2_runs.json"
python3 - "$T/cap2_runs.json" "$T/server.db" << 'PY' || fail "capture 2"
import json, sqlite3, sys
cap = json.load(open(sys.argv[1]))
r = cap["runs"][0]
late = (r["end_ns"] - cap["end_ns"]) / 1e9
assert r["end_reason"] == "end" and 0 <= late < 1.5, (r, late)
db = sqlite3.connect(sys.argv[2])
after = db.execute("SELECT COUNT(*) FROM capture_samples WHERE time_ns > ?",
                   (cap["end_ns"] + 1000000000,)).fetchone()[0]
inside = db.execute("SELECT COUNT(*) FROM capture_samples WHERE time_ns BETWEEN ? AND ?",
                    (cap["start_ns"], cap["end_ns"])).fetchone()[0]
assert after == 0, "%d timed samples after the capture's end" % after
assert inside > 0, "no timed samples in capture 2"
print("ok: capture 2 ended %.3f s after its end with the server gone (%d samples, none after)"
      % (late, inside))
PY
# --- 3. CUDA out of memory ----------------------------------------------------------
# the job stops first: alone, the new process's allocation probes stay
# attached (the duty cycle sheds allocations when the node's probes are busy)
kill -TERM -- "-$JOB_PID" 2> /dev/null || true
JOB_PID=
sleep 3
OOM_JOB=oom-$$
SIM_INIT_MS=2000 SIM_LINGER_MS=2000 STRATA_JOB=$OOM_JOB "$FIX/gpu_workload" leak 40 > "$T/oom.out" 2>&1 ||
	fail "gpu_workload leak: $(cat "$T/oom.out")"
OOM_ID=$(capture_of "$OOM_JOB" oom)
[ -n "$OOM_ID" ] || fail "no oom capture: $(grep -i 'memory' "$T/agent.log" | tail -n 3)"
wait_run_end "$OOM_ID"
api "/api/v1/captures/$OOM_ID" > "$T/oom.json"
api "/api/v1/captures/$OOM_ID/trace" > "$T/oom_trace.json"
python3 - "$T/oom.json" "$T/oom_trace.json" << 'PY' || fail "oom capture"
import json, sys
cap = json.load(open(sys.argv[1]))
ev = json.load(open(sys.argv[2]))["traceEvents"]
calls = [e for e in ev if e["ph"] == "X" and e.get("cat") in ("alloc", "free")]
failed = [e for e in calls if e["args"]["ret"] != 0]
allocs = [e for e in calls if e["cat"] == "alloc"]
frees = [e for e in calls if e["cat"] == "free"]
# 40 steps: a balanced 64 KiB and a leaked 1 MiB allocation each (the duty
# cycle may shed some of those), the balanced one freed (never shed), then
# the failure
assert len(frees) >= 40 and len(allocs) > 1 and len(failed) == 1, (len(allocs), len(frees), failed)
assert failed[0]["args"]["ret"] == 2 and failed[0]["name"] == "cudaMalloc", failed
assert max(e["ts"] for e in calls) == failed[0]["ts"], "the ring ends at the failure"
assert cap["trigger"] == "oom" and cap["targets"][0]["pid"] > 0, cap
print("ok: oom capture %s: %d allocations and %d frees before the failure (%s)"
      % (cap["id"], len(allocs) - 1, len(calls) - len(allocs), cap["reason"]))
PY
# /metrics (the server restarted in part 2: only the oom capture since)
api /metrics > "$T/metrics.txt"
grep -q '^strata_captures_total{trigger="oom"} 1$' "$T/metrics.txt" &&
	grep -q '^strata_captures_active ' "$T/metrics.txt" ||
	fail "capture metrics: $(grep capture "$T/metrics.txt")"
echo "ok: deep capture"
