# Scenario: the kernel's OOM killer ends a GPU process (docs/diagnosis.md
# "Deep capture", trigger oom_kill), the real pipeline as deployed
# (scenario_lib.sh: strata-server with its defaults, strata-agent with the
# DaemonSet's arguments, host-wide).  gpu_workload hostoom, labelled
# STRATA_JOB, runs in a memory-limited cgroup made here (cgroup v2
# memory.max, or the v1 memory controller where the host mounts that one):
# 40 steps of CUDA allocations and frees on the stand-in libraries, then
# host memory until the kernel kills it.  The agent (oom:mark_victim)
# starts a capture of its own and sends the process's last allocations
# with it; the server records it (trigger oom_kill) under the job, with
# those calls in its trace and on /metrics.
source "$(dirname "$0")/scenario_lib.sh"
[ -r /sys/kernel/tracing/events/oom/mark_victim/format ] ||
	skip "no oom:mark_victim tracepoint"

# --- a cgroup the workload fills ------------------------------------------------
LIMIT_MB=64
CG=
# a bare system (the test VM, tests/vm/vm.sh) has no cgroup mounted yet
mountpoint -q /sys/fs/cgroup || mount -t cgroup2 none /sys/fs/cgroup 2> /dev/null || true
if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2> /dev/null; then
	# v2: the parent delegates the memory controller to its children
	grep -qw memory /sys/fs/cgroup/cgroup.subtree_control ||
		echo +memory > /sys/fs/cgroup/cgroup.subtree_control 2> /dev/null ||
		skip "cannot enable the memory controller under /sys/fs/cgroup"
	CG=/sys/fs/cgroup/strata-oom-$$
	mkdir "$CG"
	echo "${LIMIT_MB}M" > "$CG/memory.max"
	echo 0 > "$CG/memory.swap.max" 2> /dev/null || true
elif [ -d /sys/fs/cgroup/memory ]; then
	CG=/sys/fs/cgroup/memory/strata-oom-$$
	mkdir "$CG"
	echo $((LIMIT_MB << 20)) > "$CG/memory.limit_in_bytes"
else
	skip "no memory cgroup controller"
fi
echo "cgroup: $CG ($LIMIT_MB MiB)"

scenario_server
# the cgroup goes when the test ends, after its process
trap 'rmdir "$CG" 2> /dev/null || true; scenario_cleanup' EXIT
scenario_agent
wait_agent_ready "$T/agent.log"

# --- the workload, killed -------------------------------------------------------
OOM_JOB=oomkill-$$
rc=0
(
	echo "$BASHPID" > "$CG/cgroup.procs"
	echo "$BASHPID" > "$T/oom.pid"
	exec env SIM_INIT_MS=3000 STRATA_JOB=$OOM_JOB "$FIX/gpu_workload" hostoom 40
) > "$T/oom.out" 2>&1 || rc=$?
OOM_PID=$(cat "$T/oom.pid")
[ "$rc" -eq 137 ] || fail "gpu_workload hostoom not killed (exit $rc): $(cat "$T/oom.out")"
KILLED_AT=$(date +%s%N)
echo "process $OOM_PID killed ($(grep -c . "$T/oom.out") lines of output)"

OOM_ID=$(capture_of "$OOM_JOB" oom_kill)
[ -n "$OOM_ID" ] ||
	fail "no oom_kill capture: $(grep -iE 'oom|capture' "$T/agent.log" | tail -n 5)"
echo "capture $OOM_ID listed $((($(date +%s%N) - KILLED_AT) / 1000000)) ms after the kill"
# the memcg context: the cgroup at its limit (its kernfs id, the inode)
grep -q "OOM killer chose process $OOM_PID (.*memory cgroup $(stat -c %i "$CG")," "$T/agent.log" ||
	fail "agent: $(grep 'OOM killer' "$T/agent.log")"
api "/api/v1/captures/$OOM_ID" > "$T/oom.json"
api "/api/v1/captures/$OOM_ID/trace" > "$T/oom_trace.json" || fail "GET trace"
python3 - "$T/oom.json" "$T/oom_trace.json" "$OOM_PID" "$T/server.db" << 'PY' || fail "oom_kill capture"
import json, sqlite3, sys
cap = json.load(open(sys.argv[1]))
tr = json.load(open(sys.argv[2]))
pid = int(sys.argv[3])
assert cap["trigger"] == "oom_kill", cap
assert cap["targets"][0]["pid"] == pid, (cap["targets"], pid)
assert "OOM killer" in cap["reason"], cap["reason"]
ev = tr["traceEvents"]
calls = [e for e in ev if e["ph"] == "X" and e.get("cat") in ("alloc", "free")]
allocs = [e for e in calls if e["cat"] == "alloc"]
frees = [e for e in calls if e["cat"] == "free"]
# 40 steps: a balanced 64 KiB allocation freed and a leaked 1 MiB one, none
# failed: host memory ran out.  Frees are never shed; allocations may be,
# all of them when another GPU process on the node keeps the probe budget's
# duty cycle busy (a benchmark run beside this test: 0 of 80 once)
assert len(frees) >= 40, (len(allocs), len(frees))
assert all(e["args"]["ret"] == 0 for e in calls), [e for e in calls if e["args"]["ret"]]
# each with its call-site stack (stored as sent: symbolized when read)
db = sqlite3.connect(sys.argv[4])
rows, stacked = db.execute("SELECT COUNT(*), SUM(g.stack_id != 0) FROM gpu_calls g "
                           "JOIN processes p ON p.id = g.process WHERE p.pid = ?", (pid,)).fetchone()
assert rows == len(calls) and stacked == rows, (rows, len(calls), stacked)
print("ok: oom_kill capture %s of job %s: %d allocations and %d frees, %d of %d with stacks (%s)"
      % (cap["id"], cap["job"], len(allocs), len(frees), stacked, rows, cap["reason"]))
PY
api /metrics > "$T/metrics.txt"
grep -q '^strata_captures_total{trigger="oom_kill"} 1$' "$T/metrics.txt" ||
	fail "capture metrics: $(grep captures_total "$T/metrics.txt")"
echo "ok: OOM kill capture (the test: ${SECONDS} s)"
