#!/usr/bin/env bash
# Framework-level GPU memory through agent -> server -> diagnosis: two
# Python training loops over the caching-allocator stand-in, one keeping a
# 4 MiB activation per step (~40 MiB/s, every tensor a block of one 1 GiB
# segment, so cudaMalloc never sees it), one only churning.  The server's
# /api/v1/leaks lists the leaking loop's framework allocations at the
# Python line apart from its segment (driver level), and the leak detector
# reports a framework leak at that line for that process, none at the
# driver level and nothing for the churning loop.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/server_lib.sh"
source "$(dirname "$0")/python_lib.sh"
require_bpf
export SIM_INIT_MS=300 C10_SEGMENT_MB=1024
line=$(py_marker_line "$PYFIX/py_tensors.py" LEAK_LINE)
steps=150 # 100 ms apart: 15 s, 600 MiB kept by the leaking loop

PORT=$(free_port)
start_server "$PORT" --diag-window-ms 1000
mkfifo "$T/go"
# one training job (the diagnosis judges jobs), two ranks: one leaks
bash -c 'read -r _ < "$1"
	STRATA_JOB=fwjob RANK=0 WORLD_SIZE=2 python3 "$2/py_tensors.py" "$3/libc10_cuda.so" \
		leak '$steps' 4096 100 > "$4/leak.out" &
	echo $! > "$4/leak.pid"
	STRATA_JOB=fwjob RANK=1 WORLD_SIZE=2 python3 "$2/py_tensors.py" "$3/libc10_cuda.so" \
		churn '$steps' 4096 100 > "$4/churn.out" &
	echo $! > "$4/churn.pid"
	wait' _ "$T/go" "$PYFIX" "$FIX" "$T" &
JOB_PID=$!
"$AGENT" --server "http://127.0.0.1:$PORT" --period 1 -F 49 --spool "$T/spool" \
	--node fw-node --pid "$JOB_PID" --drain-interval 250 \
	--gpu-lib "$FIX/libcudart.so" --gpu-lib "$FIX/libcuda.so" --gpu-lib "$FIX/libc10_cuda.so" \
	-v 2> "$T/agent.log" &
AGENT_PID=$!
wait_agent_ready "$T/agent.log"
echo go > "$T/go"
wait "$JOB_PID" || fail "workloads failed: $(cat "$T"/*.out)"
LEAK_PID=$(cat "$T/leak.pid") CHURN_PID=$(cat "$T/churn.pid")
sleep 2.5 # the last period, its upload, a judged window
kill -INT "$AGENT_PID"
wait "$AGENT_PID" || fail "agent exited with an error: $(tail -5 "$T/agent.log")"
AGENT_PID=
grep -E 'batches:|upload:' "$T/agent.log" | tail -2

api "/api/v1/leaks?pid=$LEAK_PID" > "$T/leaks.json"
api "/api/v1/leaks?pid=$CHURN_PID" > "$T/churn.json"
api "/api/v1/leak_reports?job=fwjob" > "$T/reports.json"
python3 - "$T/leaks.json" "$T/churn.json" "$T/reports.json" "$LEAK_PID" "$CHURN_PID" <<'PY' ||
import json, sys
leaks = json.load(open(sys.argv[1]))["outstanding"]
churn = json.load(open(sys.argv[2]))["outstanding"]
reports = json.load(open(sys.argv[3]))
leak_pid, churn_pid = int(sys.argv[4]), int(sys.argv[5])
# the leaking Python frame (the server names Python frames by function;
# the line is the local report's, test_gpu_framework.sh); a call site can
# have several raw stacks (the interpreter's native frames under it)
at = ["remember", "train_step", "main"]
def at_line(stack):
    names = list(reversed(stack))
    i = names.index(at[0]) if at[0] in names else -1
    return i >= 0 and names[i:i + 3] == at and names[:1] == ["c10_cuda_alloc"]
fw = [l for l in leaks if l["level"] == "framework" and at_line(l["stack"])]
drv = [l for l in leaks if l["level"] == "driver"]
n, b = sum(l["allocations"] for l in fw), sum(l["bytes"] for l in fw)
assert n >= 100 and b == n * (4 << 20), ("framework allocations at remember", fw)
assert len(drv) == 1 and drv[0]["allocations"] == 1 and drv[0]["bytes"] == 1 << 30, drv
print("ok: /api/v1/leaks: %d framework allocations (%d MiB) at c10_cuda_alloc <- ... <- remember"
      " <- train_step <- main; the driver level: one 1 GiB segment" % (n, b >> 20))
assert not [l for l in churn if l["level"] == "framework"], ("churn: framework allocations", churn)
mine = [r for r in reports if r["pid"] == leak_pid]
fwr = [r for r in mine if r["level"] == "framework" and "remember" in r["stack"]]
assert fwr, ("no framework leak report at remember", reports)
assert not any(r["level"] == "driver" for r in mine), ("the flat segment reported as a leak", mine)
assert not any(r["pid"] == churn_pid for r in reports), ("the churning loop reported", reports)
print("ok: leak report: framework level at remember, %.1f MiB/s; nothing for the churning loop"
      % (fwr[0]["growth_bytes_per_second"] / 2**20))
PY
	fail "framework allocations through the server"
