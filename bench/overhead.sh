#!/usr/bin/env bash
# Overhead of whole-host CPU sampling on a fixed-work CPU-bound workload
# (one thread per CPU), measured side by side in one run: no profiler vs
# strata-agent vs `perf record -g` vs a bpftrace profile:hz one-liner, at
# 49 Hz and 999 Hz.  Modes alternate run by run so drift hits all alike.
# Prints a markdown table (throughput ratio vs off, median of RUNS), the
# exact in-kernel cost per sample of strata's BPF program (kernel.bpf_stats),
# the agent's own CPU use and RSS over the timed windows (/proc/PID/schedstat,
# start-up not counted; first-time symbolization is), and the agent's
# steady-state CPU and RSS over STEADY_S seconds (default 60) per rate.
#   bench/overhead.sh [RUNS (default 7)] [WORK (M iterations/thread, default 6000)]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-7}
WORK=${2:-6000}
T=$(mktemp -d /tmp/strata-bench.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$T"' EXIT
[ "$(id -u)" -eq 0 ] || { echo "bench: needs root"; exit 1; }
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf 2>/dev/null || true
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
cc -O2 -g -fno-omit-frame-pointer -pthread -o "$T/workload" bench/workload.c

have() { command -v "$1" >/dev/null 2>&1; }
modes=(off strata49 strata999)
have perf && modes+=(perf49 perf999)
have bpftrace && modes+=(bpftrace49 bpftrace999)

agent_stats=()
bpf_stats=()
sysctl -qw kernel.bpf_stats_enabled=1 2>/dev/null || true
# Starts the profiler of a mode in the background; sets PROF_PID.
start_profiler() {
	PROF_PID=
	case $1 in
	off) "$T/workload" 2000 >/dev/null; sleep 2.2; return ;;
	strata*) build/strata-agent --output "$T" --period 10 --freq "${1#strata}" & PROF_PID=$! ;;
	perf*) perf record -a -g -F "${1#perf}" -o "$T/perf.data" -q >/dev/null 2>&1 & PROF_PID=$! ;;
	bpftrace*) bpftrace -e "profile:hz:${1#bpftrace} { @[kstack, ustack, pid] = count(); }" >/dev/null 2>&1 & PROF_PID=$! ;;
	esac
	sleep 1 # attached
	# An always-on profiler is warm: one untimed run lets it read and
	# symbolize the workload's files (first drain) before the clock starts.
	# Every mode, off included, gets the same warm-up.
	"$T/workload" 2000 >/dev/null
	sleep 1.2
}
# CPU ns the profiler process has used so far (0 when there is none).
cpu_ns() { [ -n "$PROF_PID" ] && awk '{print $1}' "/proc/$PROF_PID/schedstat" || echo 0; }
stop_profiler() {
	[ -n "$PROF_PID" ] || return 0
	if [[ $1 == strata* ]]; then
		local rss prog
		rss=$(awk '/VmRSS/ {print $2}' "/proc/$PROF_PID/status")
		agent_stats+=("$1 $((CPU1 - CPU0)) $rss $WALL")
		# run_time_ns and run_cnt of the sampling program, this run only.
		prog=$(bpftool prog show name profile_sample 2>/dev/null | awk "NR == 1")
		bpf_stats+=("$1 $(sed -n 's/.*run_time_ns \([0-9]*\) run_cnt \([0-9]*\).*/\1 \2/p' <<<"$prog")")
	fi
	kill -INT "$PROF_PID" 2>/dev/null || true
	wait "$PROF_PID" 2>/dev/null || true
	rm -f "$T"/*.pb.gz "$T/perf.data"
}

for r in $(seq 1 "$RUNS"); do
	for m in "${modes[@]}"; do
		start_profiler "$m"
		CPU0=$(cpu_ns)
		secs=$("$T/workload" "$WORK")
		CPU1=$(cpu_ns)
		WALL=$secs
		stop_profiler "$m"
		echo "$m $secs" >> "$T/results"
		echo "run $r/$RUNS $m: ${secs}s" >&2
	done
done

sysctl -qw kernel.bpf_stats_enabled=0 2>/dev/null || true

# Steady state: the agent's own CPU and memory over STEADY_S seconds after a
# 10 s warm-up (first symbolization of the workload's files done), with the
# workload running all along, as on a training node.
STEADY_S=${STEADY_S:-60}
steady=()
for hz in 49 999; do
	build/strata-agent --output "$T" --period 10 --freq "$hz" & a=$!
	( while kill -0 "$a" 2>/dev/null; do "$T/workload" 1000 >/dev/null; done ) & w=$!
	sleep 10
	c0=$(awk '{print $1}' "/proc/$a/schedstat")
	sleep "$STEADY_S"
	c1=$(awk '{print $1}' "/proc/$a/schedstat")
	rss=$(awk '/VmRSS/ {print $2}' "/proc/$a/status")
	kill -INT "$a"; wait "$a" 2>/dev/null || true
	wait "$w" 2>/dev/null || true
	steady+=("$hz $((c1 - c0)) $rss")
	echo "steady $hz Hz: $(( (c1 - c0) / 1000000 )) ms CPU in ${STEADY_S}s, RSS ${rss} kB" >&2
done
printf '%s\n' "${steady[@]}" > "$T/steady"
printf '%s\n' "${bpf_stats[@]}" > "$T/bpf_stats"
python3 - "$T/results" "$T/bpf_stats" "$T/steady" "$STEADY_S" "${agent_stats[@]}" <<'PY'
import statistics, sys
res = {}
for line in open(sys.argv[1]):
    m, s = line.split()
    res.setdefault(m, []).append(float(s))
off = statistics.median(res["off"])
print("| profiler | rate | median time (s) | throughput vs off | loss |")
print("|---|---|---|---|---|")
for m, v in res.items():
    med = statistics.median(v)
    name = m.rstrip("0123456789") or m
    rate = m[len(name):] or "-"
    ratio = off / med
    print(f"| {name} | {rate} Hz | {med:.3f} (n={len(v)}, min {min(v):.3f}, max {max(v):.3f}) | {ratio:.4f} | {100*(1-ratio):+.2f}% |")
bpf = {}
for line in open(sys.argv[2]):
    f = line.split()
    if len(f) == 3 and int(f[2]) > 0:
        bpf.setdefault(f[0], []).append((int(f[1]), int(f[2])))
agent = {}
for rec in sys.argv[5:]:
    m, ns, rss, wall = rec.split()
    agent.setdefault(m, []).append((int(ns) / 1e9, int(rss), float(wall)))
print()
print("| agent | BPF ns per sample (bpf_stats) | samples | agent CPU s per minute (timed windows) | agent RSS (MiB) |")
print("|---|---|---|---|---|")
for m, v in agent.items():
    cpu_per_min = statistics.median(c / w * 60 for c, _, w in v)
    rss = statistics.median(r for _, r, _ in v) / 1024
    b = bpf.get(m, [])
    per = sum(t for t, _ in b) / max(sum(n for _, n in b), 1)
    print(f"| {m} | {per:.0f} | {sum(n for _, n in b)} | {cpu_per_min:.4f} | {rss:.1f} |")
steady_s = float(sys.argv[4])
print()
print(f"| agent, steady state ({steady_s:.0f} s after a 10 s warm-up, workload running) | CPU s per minute | share of one CPU | RSS (MiB) |")
print("|---|---|---|---|")
for line in open(sys.argv[3]):
    hz, ns, rss = line.split()
    per_min = int(ns) / 1e9 / steady_s * 60
    print(f"| {hz} Hz | {per_min:.3f} | {per_min / 60 * 100:.3f}% | {int(rss) / 1024:.1f} |")
PY
