#!/usr/bin/env bash
# Scenario: NCCL hang diagnosis end to end (docs/diagnosis.md "NCCL hangs"),
# as deployed (scenario_lib.sh): strata-server with its defaults (a hang:
# ranks wait >= 5 s and >= 10 periods) <- the host-wide agent with the
# DaemonSet's arguments (--period 10 --freq 49: batches every 10 s).  Five
# jobs at once, each 4 Python ranks on the stand-in NCCL
# (tests/fixtures/py_nccl_job.py: an allreduce of 4 MiB per step, ~25 ms a
# step), each named by its own STRATA_JOB label and found by the agent by
# its labels, as torchrun's ranks are:
#   io      rank 2 blocks opening a FIFO for its input before collective 30:
#           a hang at 30, ranks 0, 1, 3 waiting, rank 2 missing, its last
#           collective 29, "blocked" on io (kernel stack fifo_open, wchan
#           wait_for_partner); /metrics and the webhook fire; the FIFO
#           written, the hang ends (resolved webhook) and a past range finds
#           the episode with its end;
#   spin    rank 1 spins in Python before 30: "running", its CPU stack in
#           spin_forever;
#   exit    rank 3 exits before 30: "gone";
#   desync  rank 1 calls a broadcast of 1 KiB where the others allreduce
#           4 MiB at collective 20: a mismatch naming rank 1, op and bytes;
#   pause   every rank sleeps 16 s outside collectives at step 20 (a
#           checkpoint; longer than a period, so a batch is cut over 5 s
#           into it): no hang, live or in the store.
source "$(dirname "$0")/scenario_lib.sh"
PY=/usr/bin/python3.11
[ -x "$PY" ] || skip "no $PY"
t0=$(date +%s)
scenario_server
scenario_agent
trap 'for p in $JOBS; do kill -TERM -- "-$p" 2> /dev/null || true; done; scenario_cleanup' EXIT
wait_agent_ready "$T/agent.log"

# job MODE RANK STEP STEPS [ENV...]: job hang-MODE-$$ in its own process
# group (the trap ends it), output in $T/MODE.out.
JOBS=
job() {
	local mode=$1 rank=$2 step=$3 steps=$4
	shift 4
	env STRATA_JOB="hang-$mode-$$" PY_NCCL_GO="$T/go" PY_NCCL_INIT_S=0.5 HANG_MODE="$mode" \
		HANG_RANK="$rank" \
		HANG_STEP="$step" "$@" setsid "$PY" "$ROOT/tests/fixtures/py_nccl_job.py" \
		"$FIX/libnccl.so" 4 "$steps" > "$T/$mode.out" 2>&1 &
	JOBS="$JOBS $!"
}

# wait_hangs QUERY PYEXPR [SECONDS]: until /api/v1/hangs?QUERY answers a
# list for which PYEXPR (over `h`) is true; the answer in $T/hangs.json.
wait_hangs() {
	local i
	for i in $(seq $((${3:-40} * 2))); do
		api "/api/v1/hangs?$1" > "$T/hangs.json" 2> /dev/null &&
			python3 -c "import json,sys; h = json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" \
				"$T/hangs.json" && return 0
		sleep 0.5
	done
	echo "last answer: $(cat "$T/hangs.json")"
	return 1
}

# dump_job MODE: what the server stored of job MODE's ranks (the pids its
# output names), for a failure's post-mortem.
dump_job() {
	local pids
	pids=$(sed -n 's/^py_nccl_job: rank [0-9]* pid \([0-9]*\) loaded$/\1/p' "$T/$1.out" | paste -sd,)
	echo "job $1: ranks' pids $pids; processes, communicators, collectives stored:"
	sqlite3 "$T/server.db" "SELECT 'process', id, pid, job, rank, first_ns, last_ns FROM processes WHERE pid IN ($pids)" \
		"SELECT 'comm', p.pid, c.comm_hash, c.rank, c.batch FROM nccl_comms c JOIN processes p ON p.id = c.process WHERE p.pid IN ($pids)" \
		"SELECT 'calls', p.pid, n.comm_hash, count(*), max(n.seq), min(n.batch), max(n.batch) FROM nccl_collectives n JOIN processes p ON p.id = n.process WHERE p.pid IN ($pids) GROUP BY 1, 2, 3" \
		"SELECT 'batch', id, start_ns, end_ns FROM batches WHERE node = 'scen-node'" || true
}

# pause_clean: the pause job has no hang now
pause_clean() {
	api "/api/v1/hangs?job=hang-pause-$$" > "$T/pause.json" || fail "GET hangs (pause)"
	[ "$(cat "$T/pause.json")" = "[]" ] || fail "a false hang in a checkpoint pause: $(cat "$T/pause.json")"
}

# The jobs start just after a batch is cut, so that the exiting rank is
# gone before the next one: the agent never reads its labels while it
# lives (its job comes from what the GPU layer read when it began to
# follow it).
for _ in $(seq 150); do grep -q "batches: built=" "$T/agent.log" && break; sleep 0.1; done
mkfifo "$T/source"
job io 2 30 2000 HANG_FIFO="$T/source"
job spin 1 30 2000 HANG_SECONDS=30
job exit 3 30 2000
job desync 1 20 2000
job pause -1 20 800 HANG_SECONDS=16
J=hang-io-$$
# 20 ranks and 5 launchers start at once on a small machine: the ranks wait
# (as a real one imports torch and creates its CUDA context: seconds)
# until the agent follows every one of them, so it sees their
# ncclCommInitRank (the communicator's identity and each rank's place).
# Here that takes about a second.  "18 of 20 ranks loaded" for good (CI at
# stop 21, a fresh clone at 7ca6da6) was two ranks' lines printed at once
# and run together (print() under PYTHONUNBUFFERED writes the newline
# apart; py_nccl_job.py now writes each line at once).  The progress is
# printed every 5 s and a failure shows the ranks' output and state.
t_start=$(date +%s.%N)
i=0
for _ in $(seq 400); do
	pids=$(sed -n 's/^py_nccl_job: rank [0-9]* pid \([0-9]*\) loaded$/\1/p' "$T"/*.out)
	n=0 traced=0
	for p in $pids; do
		n=$((n + 1))
		grep -q "gpu: tracing pid $p " "$T/agent.log" && traced=$((traced + 1))
	done
	[ "$n" -eq 20 ] && [ "$traced" -eq 20 ] && break
	[ $((i % 20)) -eq 0 ] && echo "  $(python3 -c "import time; print('%.1f' % (time.time() - $t_start))") s: $n ranks loaded, $traced followed"
	i=$((i + 1))
	sleep 0.25
done
[ "$traced" -eq 20 ] || {
	for f in "$T"/*.out; do echo "$f:" && tail -5 "$f"; done
	ps -eo pid,ppid,stat,etimes,wchan:32,args | grep '[p]y_nccl_job'
	fail "the agent follows $traced of $n ranks: $(tail -3 "$T/agent.log")"
}
echo "ok: the agent follows all 20 ranks $(python3 -c "import time; print('%.1f' % (time.time() - $t_start))") s after the jobs started"
touch "$T/go"

# ---- io: rank 2 waits for its input before collective 30 -------------------
for _ in $(seq 120); do grep -q "at step 30: io" "$T/io.out" && break; sleep 0.25; done
grep -q "at step 30: io" "$T/io.out" || fail "the io rank never reached step 30: $(tail -3 "$T/io.out")"
t_stall=$(date +%s.%N)
wait_hangs "job=$J" 'len(h) == 1 and h[0]["kind"] == "missing"' 40 ||
	{ dump_job io; fail "no hang for the io rank"; }
t_hang=$(date +%s.%N)
python3 - "$T/hangs.json" << 'PY' || fail "io hang report"
import json, sys
h = json.load(open(sys.argv[1]))[0]
print("hang:", h["op"], "#%d" % h["seq"], "waiting", [r["rank"] for r in h["waiting"]],
      "missing", [(r["rank"], r["state"], r["reason"], r["thread"]["wchan"]) for r in h["missing"]])
assert h["seq"] == 30 and h["op"] == "AllReduce" and h["bytes"] == 4 << 20 and h["nranks"] == 4, h
assert sorted(r["rank"] for r in h["waiting"]) == [0, 1, 3], h["waiting"]
assert h["threshold_seconds"] == 5.0, h
m = h["missing"]
assert len(m) == 1 and m[0]["rank"] == 2 and m[0]["known"], m
assert m[0]["last_collective"]["seq"] == 29 and m[0]["last_collective"]["op"] == "AllReduce", m
assert m[0]["state"] == "blocked" and m[0]["reason"] == "io", m
assert "fifo_open" in m[0]["thread"]["kernel_stack"] or "wait_for_partner" in m[0]["thread"]["wchan"], m
assert h["until"] is None, h
PY
echo "ok: io hang decided $(python3 -c "print('%.1f' % ($t_hang - $t_stall))") s after the stall began (batches every 10 s)"
api /metrics > "$T/metrics.txt" || fail "GET /metrics"
grep "^strata_nccl_hang{job=\"$J\",.*seq=\"30\",kind=\"missing\",op=\"AllReduce\"} 1" "$T/metrics.txt" ||
	fail "no strata_nccl_hang series: $(grep "^strata_nccl_hang" "$T/metrics.txt")"
pause_clean

# ---- spin: rank 1 spins in Python before collective 30 ---------------------
wait_hangs "job=hang-spin-$$" 'len(h) == 1 and h[0]["missing"][0].get("cpu_samples", 0) > 0' 30 ||
	{ dump_job spin; fail "no hang for the spinning rank"; }
python3 - "$T/hangs.json" << 'PY' || fail "spin hang report"
import json, sys
h = json.load(open(sys.argv[1]))[0]
m = h["missing"]
print("missing:", [(r["rank"], r["state"], r["thread"]["state"], r["cpu_stack"][-80:]) for r in m])
assert h["seq"] == 30 and len(m) == 1 and m[0]["rank"] == 1 and m[0]["state"] == "running", m
assert "spin_forever" in m[0]["cpu_stack"], m
PY
echo "ok: the spinning rank is running in spin_forever"

# ---- exit: rank 3 exits before collective 30 --------------------------------
wait_hangs "job=hang-exit-$$" 'len(h) == 1 and h[0]["missing"][0]["state"] == "gone"' 30 ||
	{ dump_job exit; fail "no hang naming the exited rank"; }
python3 - "$T/hangs.json" << 'PY' || fail "exit hang report"
import json, sys
h = json.load(open(sys.argv[1]))[0]
m = h["missing"]
assert h["seq"] == 30 and len(m) == 1 and m[0]["rank"] == 3 and m[0]["exited"], m
assert m[0]["last_collective"]["seq"] == 29, m
print("ok: rank 3 gone at %.3f, its last collective #%d" % (m[0]["exited"], m[0]["last_collective"]["seq"]))
PY

# ---- desync: rank 1 broadcasts where the others allreduce ------------------
wait_hangs "job=hang-desync-$$" 'any(x["kind"] == "mismatch" for x in h)' 20 ||
	{ dump_job desync; fail "no mismatch"; }
python3 - "$T/hangs.json" << 'PY' || fail "mismatch report"
import json, sys
h = [x for x in json.load(open(sys.argv[1])) if x["kind"] == "mismatch"][0]
m = h["mismatched"]
assert h["seq"] == 20 and h["op"] == "AllReduce" and h["bytes"] == 4 << 20, h
assert len(m) == 1 and m[0]["rank"] == 1 and m[0]["op"] == "Broadcast" and m[0]["bytes"] == 1024, m
print("ok: mismatch at #20: rank 1 called Broadcast of 1024 B, the others AllReduce of 4 MiB")
PY
pause_clean

# ---- io, continued: the input comes, rank 2 enters 30, the hang ends ---------
echo resume > "$T/source"
wait_hangs "job=$J" 'len(h) == 0' 30 || fail "the io hang did not end"
python3 - "$T/hooks" "$J" << 'PY' || fail "hang webhooks"
import json, sys
alerts = [a for line in open(sys.argv[1]) for a in json.loads(line.split(" ", 1)[1])["alerts"]
          if a["labels"]["alertname"] == "StrataNcclHang" and a["labels"]["job"] == sys.argv[2]]
st = [a["status"] for a in alerts]
assert st[:2] == ["firing", "resolved"], st
assert alerts[0]["labels"]["seq"] == "30", alerts[0]
assert "rank 2" in alerts[0]["annotations"]["summary"], alerts[0]
print("ok: webhook", st[:2], "-", alerts[0]["annotations"]["summary"])
PY
now=$(date +%s)
api "/api/v1/hangs?job=$J&from=$((now - 600))&to=$((now + 1))" > "$T/past.json"
python3 - "$T/past.json" << 'PY' || fail "past range"
import json, sys
h = json.load(open(sys.argv[1]))
assert len(h) == 1 and h[0]["seq"] == 30 and h[0]["until"] is not None, h
print("ok: the past range has the episode, %.1f s long" % (h[0]["until"] - h[0]["decided_at"]))
PY

# ---- pause: every rank paused 16 s at once: no hang, then or since ----------
grep -q "at step 20: pause" "$T/pause.out" || fail "the pause job never paused: $(tail -3 "$T/pause.out")"
for _ in $(seq 120); do grep -q "exit codes" "$T/pause.out" && break; sleep 0.5; done
grep -q "exit codes \[0, 0, 0, 0\]" "$T/pause.out" || fail "the pause job did not finish: $(tail -3 "$T/pause.out")"
pause_clean
api "/api/v1/hangs?job=hang-pause-$$&from=$((t0 - 1))&to=$(($(date +%s) + 1))" > "$T/pause.json"
[ "$(cat "$T/pause.json")" = "[]" ] || fail "a hang stored for the checkpoint pause: $(cat "$T/pause.json")"
# the pause was seen: every rank's collectives on both sides of it stored
pids=$(sed -n 's/^py_nccl_job: rank [0-9]* pid \([0-9]*\) loaded$/\1/p' "$T/pause.out" | paste -sd,)
n=$(sqlite3 "$T/server.db" "SELECT count(DISTINCT p.pid) FROM nccl_collectives n
	JOIN processes p ON p.id = n.process WHERE p.pid IN ($pids) AND n.seq = 19 AND n.comm_hash != 0")
m=$(sqlite3 "$T/server.db" "SELECT count(DISTINCT p.pid) FROM nccl_collectives n
	JOIN processes p ON p.id = n.process WHERE p.pid IN ($pids) AND n.seq = 20 AND n.comm_hash != 0")
[ "$n" = 4 ] && [ "$m" = 4 ] || { dump_job pause; fail "the pause job's collectives 19 and 20 not stored for every rank: $n, $m"; }
echo "ok: no hang while every rank paused 16 s between collectives 19 and 20"
api /metrics | grep -E "^strata_nccl_hang(s_total|_drops_total)"
echo "ok: five hang scenarios in $(($(date +%s) - t0)) s"
