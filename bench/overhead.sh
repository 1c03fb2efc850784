#!/usr/bin/env bash
# Overhead of whole-host CPU sampling on a fixed-work CPU-bound workload
# (one thread per CPU), measured side by side in one run: no profiler vs
# strata-agent vs `perf record -g` vs a bpftrace profile:hz one-liner, at
# 49 Hz and 999 Hz.  Modes alternate run by run so drift hits all alike.
# Prints a markdown table (throughput ratio vs off, median of RUNS) and the
# agent's RSS and CPU seconds per minute.
#   bench/overhead.sh [RUNS (default 5)] [WORK (M iterations/thread, default 6000)]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
WORK=${2:-6000}
T=$(mktemp -d /tmp/strata-bench.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$T"' EXIT
[ "$(id -u)" -eq 0 ] || { echo "bench: needs root"; exit 1; }
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf 2>/dev/null || true
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
cc -O2 -g -fno-omit-frame-pointer -pthread -o "$T/workload" bench/workload.c

have() { command -v "$1" >/dev/null 2>&1; }
modes=(off strata49 strata999)
have perf && modes+=(perf49 perf999)
have bpftrace && modes+=(bpftrace49 bpftrace999)

agent_stats=()
# Starts the profiler of a mode in the background; sets PROF_PID.
start_profiler() {
	PROF_PID=
	case $1 in
	off) return ;;
	strata*) build/strata-agent --output "$T" --period 10 --freq "${1#strata}" & PROF_PID=$! ;;
	perf*) perf record -a -g -F "${1#perf}" -o "$T/perf.data" -q >/dev/null 2>&1 & PROF_PID=$! ;;
	bpftrace*) bpftrace -e "profile:hz:${1#bpftrace} { @[kstack, ustack, pid] = count(); }" >/dev/null 2>&1 & PROF_PID=$! ;;
	esac
	sleep 2 # attached and settled before the clock starts
}
stop_profiler() {
	[ -n "$PROF_PID" ] || return 0
	if [[ $1 == strata* ]]; then
		# utime+stime (fields 14, 15) in clock ticks, and RSS, while running.
		local stat rss
		stat=$(awk '{print $14 + $15}' "/proc/$PROF_PID/stat")
		rss=$(awk '/VmRSS/ {print $2}' "/proc/$PROF_PID/status")
		local age=$(( $(date +%s) - START_TS ))
		agent_stats+=("$1 $stat $rss $age")
	fi
	kill -INT "$PROF_PID" 2>/dev/null || true
	wait "$PROF_PID" 2>/dev/null || true
	rm -f "$T"/*.pb.gz "$T/perf.data"
}

for r in $(seq 1 "$RUNS"); do
	for m in "${modes[@]}"; do
		START_TS=$(date +%s)
		start_profiler "$m"
		secs=$("$T/workload" "$WORK")
		stop_profiler "$m"
		echo "$m $secs" >> "$T/results"
		echo "run $r/$RUNS $m: ${secs}s" >&2
	done
done

hz=$(getconf CLK_TCK)
python3 - "$T/results" "$hz" "${agent_stats[@]}" <<'PY'
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
hz = float(sys.argv[2])
agent = {}
for rec in sys.argv[3:]:
    m, ticks, rss, age = rec.split()
    agent.setdefault(m, []).append((float(ticks) / hz, int(rss), max(int(age), 1)))
print()
print("| agent | CPU s per minute (whole host) | RSS (MiB) |")
print("|---|---|---|")
for m, v in agent.items():
    cpu_per_min = statistics.median(c / a * 60 for c, _, a in v)
    rss = statistics.median(r for _, r, _ in v) / 1024
    print(f"| {m} | {cpu_per_min:.3f} | {rss:.1f} |")
PY
