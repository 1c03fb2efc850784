#!/usr/bin/env bash
# Cost of a deep capture (docs/diagnosis.md "Deep capture"), as deployed:
# strata-server with its defaults, strata-agent with the DaemonSet's
# arguments (host-wide, --period 10 --freq 49), the 4-rank train_sim job on
# the stand-in CUDA/NCCL (16 launches, one allreduce per step).  Phases of
# PHASE seconds, alternating ROUNDS times: no capture (the always-on
# agent), a capture at 199 Hz with every GPU call, one at 999 Hz with every
# GPU call.  Per phase: the job's mean step time (what the ranks print
# every 2 s, all ranks), its slowdown against the no-capture phases, and
# the agent's own CPU time (utime + stime, % of one CPU), and the run time
# of the agent's BPF programs (kernel.bpf_stats_enabled on for the run):
# the always-on sampler, the capture's timed sampler, the GPU probes, as %
# of one CPU: exact where the wall-clock numbers drown in a shared
# machine's noise (that time is charged to whatever task was interrupted
# or probed: mostly the ranks).
#   bench/capture.sh [PHASE (default 30)] [ROUNDS (default 2)]
set -euo pipefail
cd "$(dirname "$0")/.."
PHASE=${1:-30}
ROUNDS=${2:-2}
[ "$(id -u)" -eq 0 ] || { echo "bench: needs root"; exit 1; }
T=$(mktemp -d /tmp/strata-bench.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null || true; done
	[ -n "${JOB:-}" ] && kill -- "-$JOB" 2> /dev/null || true
	wait 2> /dev/null || true
	rm -rf "$T"
}
STATS0=$(cat /proc/sys/kernel/bpf_stats_enabled)
trap 'cleanup; echo "$STATS0" > /proc/sys/kernel/bpf_stats_enabled' EXIT
echo 1 > /proc/sys/kernel/bpf_stats_enabled
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
build/strata-server --listen "127.0.0.1:$PORT" --store "sqlite:$T/db" --no-debuginfod \
	> "$T/server.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -sf "$URL/healthz" > /dev/null && break; sleep 0.1; done
STRATA_NODE_NAME=bench-node build/strata-agent --server "$URL" --spool "$T/spool" \
	--spool-max 512 --period 10 --freq 49 2> "$T/agent.log" &
AGENT=$!
PIDS+=($AGENT)
sleep 3
JOBNAME=bench-capture-$$
SIM_INIT_MS=500 SIM_KERNEL_US=1000 STRATA_JOB=$JOBNAME setsid build/fixtures/train_sim 4 100000000 \
	> "$T/train.out" 2>&1 &
JOB=$!
sleep 40 # the agent attached (its first unwind tables built), the job in its steady state

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# run time (ns) of the agent's BPF programs, by kind: "sampler timed gpu"
bpf_ns() {
	python3 - "$AGENT" << 'PY'
import json, os, subprocess, sys
pid = sys.argv[1]
ids = set()
for fd in os.listdir("/proc/%s/fd" % pid):
    try:
        if os.readlink("/proc/%s/fd/%s" % (pid, fd)) != "anon_inode:bpf-prog":
            continue
        for line in open("/proc/%s/fdinfo/%s" % (pid, fd)):
            if line.startswith("prog_id:"):
                ids.add(int(line.split()[1]))
    except OSError:
        pass
t = {"sampler": 0, "timed": 0, "gpu": 0}
for p in json.loads(subprocess.check_output(["bpftool", "prog", "show", "-j"])):
    if p["id"] not in ids:
        continue
    k = {"profile_sample": "sampler", "capture_sample": "timed"}.get(
        p.get("name"), "gpu" if p.get("name", "").startswith("gpu_") else None)
    if k:
        t[k] += p.get("run_time_ns", 0)
print(t["sampler"], t["timed"], t["gpu"])
PY
}
job_ticks() { # the ranks' CPU time (the probes' and interrupts' cost is charged to them)
	local t=0 p
	for p in $(pgrep -P "$JOB"); do t=$((t + $(cpu_ticks "$p"))); done
	echo "$t"
}
hz=$(getconf CLK_TCK)
# phase NAME FREQ: measures PHASE seconds (FREQ 0: no capture)
phase() {
	local name=$1 freq=$2 off0 off1 t0 t1
	if [ "$freq" -gt 0 ]; then
		# the agent hears at its next batch: start 15 s on, run past the phase
		curl -sf -X POST "$URL/api/v1/captures?job=$JOBNAME&duration_s=$((PHASE + 4))&freq=$freq&start_in_s=15" \
			> "$T/cap.json"
		sleep 16
	fi
	off0=$(stat -c %s "$T/train.out")
	t0=$(cpu_ticks "$AGENT")
	j0=$(job_ticks)
	read -r s0 c0 g0 < <(bpf_ns)
	sleep "$PHASE"
	read -r s1 c1 g1 < <(bpf_ns)
	t1=$(cpu_ticks "$AGENT")
	j1=$(job_ticks)
	echo "$name $(((s1 - s0) / PHASE / 100000)) $(((c1 - c0) / PHASE / 100000)) $(((g1 - g0) / PHASE / 100000))" \
		>> "$T/bpf"
	off1=$(stat -c %s "$T/train.out")
	tail -c +"$((off0 + 1))" "$T/train.out" | head -c "$((off1 - off0))" |
		awk -v n="$name" -v cpu="$(((t1 - t0) * 100))" -v hz="$hz" -v s="$PHASE" \
			-v job="$((j1 - j0))" '
			/mean step/ { sum += $(NF - 3); k++; steps += $(NF - 7) }
			END { printf "%s %.4f %d %.2f %.4f\n", n, k ? sum / k : 0, k, cpu / hz / s,
				steps ? job * 1000 / hz / steps : 0 }' >> "$T/phases"
	[ "$freq" -gt 0 ] && sleep 6 || true # the capture ends
}
for ((r = 0; r < ROUNDS; r++)); do
	phase off 0
	phase c199 199
	phase c999 999
done
grep -q "capture .*: started" "$T/agent.log" 2> /dev/null || true
echo "deep capture cost: train_sim 4 ranks (16 x 1 ms kernels + allreduce per step),"
echo "$ROUNDS rounds of $PHASE s phases; step = mean of the ranks' 2-s means"
echo "job CPU per step: the 4 ranks' utime + stime over their steps (ms)"
echo "| phase | mean step (ms) | 2-s means | slowdown vs off | job CPU per step (ms) | vs off | agent CPU (% of one CPU) |"
echo "|---|---|---|---|---|---|---|"
awk '{ s[$1] += $2 * $3; k[$1] += $3; c[$1] += $4; j[$1] += $5; r[$1]++ }
	END {
		base = s["off"] / k["off"]
		jbase = j["off"] / r["off"]
		split("off c199 c999", order, " ")
		for (i = 1; i <= 3; i++) {
			p = order[i]
			printf "| %s | %.3f | %d | %+.2f%% | %.3f | %+.2f%% | %.2f |\n", p, s[p] / k[p],
				k[p], (s[p] / k[p] / base - 1) * 100, j[p] / r[p],
				(j[p] / r[p] / jbase - 1) * 100, c[p] / r[p]
		}
	}' "$T/phases"
echo
echo "BPF programs' run time, % of one CPU (x0.01: the numbers are 1/10000 of a CPU)"
echo "| phase | always-on sampler | timed sampler | GPU probes |"
echo "|---|---|---|---|"
awk '{ s[$1] += $2; c[$1] += $3; g[$1] += $4; r[$1]++ }
	END {
		split("off c199 c999", order, " ")
		for (i = 1; i <= 3; i++) {
			p = order[i]
			printf "| %s | %.2f%% | %.2f%% | %.2f%% |\n", p, s[p] / r[p] / 100, c[p] / r[p] / 100,
				g[p] / r[p] / 100
		}
	}' "$T/bpf"
echo "per round (phase, mean step ms, job CPU ms/step, agent CPU %):"
awk '{ printf "  %s %.3f %.3f %.2f\n", $1, $2, $5, $4 }' "$T/phases"
