#!/usr/bin/env bash
# Cost of the scheduler layer as deployed: strata-agent --server (a local
# strata-server on SQLite), with and without the scheduler layer, for one
# targeted job (--pid) and host-wide (the DaemonSet's mode: the layer
# follows the automatic targets), side by side with no agent, modes
# interleaved run by run in one session.  Host-wide runs have targets
# present: 4 sleeping processes with RANK set (targets that do not run),
# and in host+active also one with RANK set that wakes every 10 ms (its
# CPU hosts a target, so the switches of others there are charged as
# foreign time).  Workloads: the
# context-switch worst case (`perf bench sched pipe`, 2 switches per op) and
# a realistic one (train_sim: 4 ranks of simulated kernels + collectives).
# Per mode: workload time (median of RUNS) and its ratio to no agent, agent
# CPU (utime+stime over the run), and the BPF run time per sched_switch /
# sched_wakeup call from kernel.bpf_stats_enabled.
#   bench/sched_agent.sh [RUNS (default 3)] [PIPE_LOOPS (default 200000)] [TRAIN_STEPS (default 60)]
# BENCH_MODES="off host host+sched" picks modes; BENCH_WORKLOADS="pipe" workloads.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
LOOPS=${2:-200000}
STEPS=${3:-60}
T=$(mktemp -d /tmp/strata-bench.XXXXXX)
SRV_PID=
cleanup() {
	[ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null && wait "$SRV_PID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
[ "$(id -u)" -eq 0 ] || { echo "bench: needs root"; exit 1; }
command -v perf >/dev/null || { echo "bench: needs perf (linux-perf)"; exit 1; }
command -v bpftool >/dev/null || { echo "bench: needs bpftool"; exit 1; }
sysctl -qw kernel.bpf_stats_enabled=1
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
build/strata-server --listen "127.0.0.1:$PORT" --store "sqlite:$T/server.db" --no-debuginfod \
	> "$T/server.log" 2>&1 &
SRV_PID=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
export SIM_INIT_MS=400 SIM_KERNEL_US=200

# BPF programs loaded after the snapshot of ids (this agent's), with
# kernel.bpf_stats_enabled: {id: [name, run_cnt, run_time_ns]}.
SCHED_PROGS='on_switch on_wakeup on_wakeup_new on_fork on_thread_exit on_softirq_entry on_softirq_exit on_irq_entry on_irq_exit'
progs_max_id() {
	bpftool -j prog show 2> /dev/null | python3 -c 'import json, sys; print(max([p["id"] for p in json.load(sys.stdin)] or [0]))'
}
progs_snapshot() {
	bpftool -j prog show 2> /dev/null | python3 -c '
import json, sys
names = set(sys.argv[2].split())
print(json.dumps({str(p["id"]): [p["name"], p.get("run_cnt", 0), p.get("run_time_ns", 0)]
                  for p in json.load(sys.stdin) if p["id"] > int(sys.argv[1]) and p["name"] in names}))' "$1" "$SCHED_PROGS"
}

# run_one MODE WORKLOAD: prints "seconds agent_cpu_s switch_ns bpf_ms".
# The workload waits on a FIFO until the agent has attached (--pid needs
# its PID first), so agent start-up is outside the timed part.
run_one() {
	local mode=$1 wl=$2 args=() apid= t0 t1 cpu=0 sw=- wk=-
	rm -f "$T/go"
	mkfifo "$T/go"
	if [ "$wl" = pipe ]; then
		bash -c 'read -r _ < "$1"; exec perf bench sched pipe -l "$2"' _ "$T/go" "$LOOPS" \
			> "$T/wl.out" 2>&1 &
	else
		bash -c 'read -r _ < "$1"; exec build/fixtures/train_sim 4 "$2"' _ "$T/go" "$STEPS" \
			> "$T/wl.out" 2>&1 &
	fi
	local wpid=$!
	local act=
	case $mode in
	pid) args=(--pid "$wpid" --no-sched) ;;
	pid+sched) args=(--pid "$wpid") ;;
	host) args=(--no-sched) ;;
	host+sched) args=() ;;
	host+active)
		args=()
		env RANK=9 bash -c 'while :; do sleep 0.01; done' &
		act=$!
		;;
	esac
	local maxid
	maxid=$(progs_max_id)
	if [ "$mode" != off ]; then
		build/strata-agent --server "http://127.0.0.1:$PORT" --spool "$T/spool" --period 1 \
			-F 49 "${args[@]}" > "$T/agent.log" 2>&1 &
		apid=$!
		sleep 2
	fi
	progs_snapshot "$maxid" > "$T/before.json"
	t0=$(date +%s.%N)
	echo go > "$T/go"
	wait "$wpid"
	t1=$(date +%s.%N)
	progs_snapshot "$maxid" > "$T/after.json"
	if [ -n "$apid" ]; then
		cpu=$(awk '{ print ($14 + $15) / '"$(getconf CLK_TCK)"' }' "/proc/$apid/stat")
		# this agent's scheduler programs during the workload: ns per run
		# of on_switch, and their total run time in ms
		read -r sw wk < <(python3 - "$T/before.json" "$T/after.json" <<'PY'
import json, sys
b, a = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
tot, sw = 0, '-'
for pid, (name, cnt, ns) in a.items():
    c0, n0 = b.get(pid, [name, 0, 0])[1:]
    tot += ns - n0
    if name == 'on_switch' and cnt > c0:
        sw = '%.0f' % ((ns - n0) / (cnt - c0))
print(sw, '%.1f' % (tot / 1e6))
PY
)
		kill -INT "$apid"
		wait "$apid" || true
	fi
	if [ -n "$act" ]; then
		kill "$act"
		wait "$act" 2> /dev/null || true
	fi
	if [ "$wl" = pipe ]; then
		awk '/usecs\/op/ { printf "%s ", $1 }' "$T/wl.out"
	else
		awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f ", b - a }'
	fi
	echo "$cpu $sw $wk"
}

SLEEPERS=()
for r in 0 1 2 3; do
	env RANK=$r WORLD_SIZE=4 sleep 100000 &
	SLEEPERS+=($!)
done
trap 'kill "${SLEEPERS[@]}" 2>/dev/null; cleanup' EXIT
read -r -a MODES <<< "${BENCH_MODES:-off pid pid+sched host host+sched host+active}"
for wl in ${BENCH_WORKLOADS:-pipe train}; do
	declare -A res=() cpu=() sw=() wk=()
	for ((r = 0; r < RUNS; r++)); do
		for m in "${MODES[@]}"; do
			read -r v c s w < <(run_one "$m" "$wl")
			res[$m]+="$v "
			cpu[$m]+="$c "
			sw[$m]=$s
			# the programs' share of the workload's wall time
			if [ "$w" != - ] && [ -n "$w" ]; then
				wk[$m]+="$(awk -v b="$w" -v v="$v" -v l="$LOOPS" -v p="$wl" \
					'BEGIN { ms = p == "pipe" ? v * l / 1000 : v * 1000; printf "%.2f", 100 * b / ms }') "
			fi
		done
	done
	median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
	base=$(echo "${res[off]}" | median)
	unit=$([ "$wl" = pipe ] && echo "usec/op" || echo "s wall")
	echo
	echo "workload: $wl ($([ "$wl" = pipe ] && echo "perf bench sched pipe -l $LOOPS" || echo "train_sim 4 ranks, $STEPS steps"))"
	echo "| mode | $unit (median of $RUNS) | vs off | agent CPU s (median) | on_switch ns/run | sched BPF time / run time (median) |"
	echo "|---|---|---|---|---|---|"
	for m in "${MODES[@]}"; do
		v=$(echo "${res[$m]}" | median)
		echo "| $m | $v | $(awk -v a="$v" -v b="$base" 'BEGIN { printf "%+.1f%%", 100 * (a - b) / b }') | $(echo "${cpu[$m]}" | median) | ${sw[$m]} | $(echo "${wk[$m]:--}" | median)% |"
	done
	unset res cpu sw wk
done
