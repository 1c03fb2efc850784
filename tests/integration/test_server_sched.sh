# The scheduler layer through agent -> server -> diagnosis API (strata-agent
# runs it by default for --pid/--cgroup targets).  train_sim 4 ranks, rank 2
# with an I/O stall (uncached reads of its batch file, SIM_IO_RANK): the
# server's /api/v1/breakdown?job=... gives rank 2's main thread an io_wait
# share well above every other rank's, and the batches carry off-CPU samples
# by reason with blocking stacks (/api/v1/profile kind offcpu).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/server_lib.sh"
require_bpf
# SIM_INIT_MS: the stand-in libraries are attached at the ranks' first scan
export SIM_INIT_MS=400 SIM_KERNEL_US=200 SIM_IO_RANK=2 SIM_IO_STALL_MS=40
steps=40

PORT=$(free_port)
start_server "$PORT" --diag-window-ms 1000 --diag-delay-ms 500 --diag-on-query
mkfifo "$T/go"
bash -c 'read -r _ < "$1"; exec "$2/train_sim" 4 '$steps' > "$3/train.out" 2>&1' \
	_ "$T/go" "$FIX" "$T" &
JOB_PID=$!
"$AGENT" --server "http://127.0.0.1:$PORT" --period 1 -F 49 --spool "$T/spool" \
	--node sched-node --pid "$JOB_PID" --drain-interval 100 -v 2> "$T/agent.log" &
AGENT_PID=$!
wait_agent_ready "$T/agent.log"
echo go > "$T/go"
wait "$JOB_PID" || fail "train_sim failed: $(cat "$T/train.out")"
sleep 2.5 # the last period, then its upload
kill -INT "$AGENT_PID"
wait "$AGENT_PID" || fail "agent exited with an error: $(tail -5 "$T/agent.log")"
AGENT_PID=
grep -E 'batches:|upload:' "$T/agent.log" | tail -2

api "/api/v1/processes" > "$T/procs.json"
JOB=$(python3 -c 'import json,sys
p=[p for p in json.load(open(sys.argv[1]))["processes"] if p.get("rank") is not None]
print(p[0]["job"])' "$T/procs.json")
[ -n "$JOB" ] || fail "no ranked process"
api "/api/v1/breakdown?job=$JOB" > "$T/bd.json"
python3 - "$T/bd.json" <<'PY' || fail "breakdown through the server"
import json, sys
bd = json.load(open(sys.argv[1]))
share = {}
for r in bd:
    wall = r["wall_seconds"]
    assert wall > 0, r
    share[r["rank"]] = r["seconds"]["io_wait"] / wall
    print("rank %d: wall %.3f s, io_wait %.3f s (%.1f%%), collective %.3f s, cpu %.3f s" % (
        r["rank"], wall, r["seconds"]["io_wait"], 100 * share[r["rank"]],
        r["seconds"]["collective"], r["seconds"]["cpu"]))
assert sorted(share) == [0, 1, 2, 3], share
others = max(v for k, v in share.items() if k != 2)
assert share[2] >= 0.2 and share[2] >= 3 * others + 0.05, share
print("ok: rank 2 io_wait share %.1f%%, others at most %.1f%%" % (100 * share[2], 100 * others))
PY
