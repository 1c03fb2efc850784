#!/usr/bin/env bash
# Cost of the scheduler layer on the worst case for it: a context-switch
# ping-pong (`perf bench sched pipe`, two processes, 2 switches per op).
# Modes alternate run by run in one session: no profiler, `strata record`
# (CPU sampling only) and `strata record --sched`, both targeting the bench
# and its fork.  Prints usec/op per mode (median of RUNS) and the in-kernel
# run time per sched_switch call from kernel.bpf_stats.
#   bench/sched.sh [RUNS (default 5)] [LOOPS (default 200000)]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
LOOPS=${2:-200000}
T=$(mktemp -d /tmp/strata-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
[ "$(id -u)" -eq 0 ] || { echo "bench: needs root"; exit 1; }
command -v perf >/dev/null || { echo "bench: needs perf (linux-perf)"; exit 1; }
sysctl -qw kernel.bpf_stats_enabled=1 2>/dev/null || true

bench() { perf bench sched pipe -l "$LOOPS" 2>&1 | awk '/usecs\/op/ { print $1 }'; }
declare -A res
for ((r = 0; r < RUNS; r++)); do
	res[off]+="$(bench) "
	res[cpu]+="$(build/strata record -F 49 -o "$T/a.folded" -- \
		perf bench sched pipe -l "$LOOPS" 2>/dev/null | awk '/usecs\/op/ { print $1 }') "
	res[sched]+="$(build/strata record -F 49 --sched "$T/s.json" -o "$T/b.folded" -- \
		perf bench sched pipe -l "$LOOPS" 2>/dev/null | awk '/usecs\/op/ { print $1 }') "
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
off=$(echo "${res[off]}" | median)
echo "| mode | usec/op (median of $RUNS) | vs off |"
echo "|---|---|---|"
for m in off cpu sched; do
	v=$(echo "${res[$m]}" | median)
	echo "| $m | $v | $(awk -v a="$v" -v b="$off" 'BEGIN { printf "%+.1f%%", 100 * (a - b) / b }') |"
done

# In-kernel cost per sched_switch invocation (host-wide: every switch on
# the machine runs the program, target or not), over one more sched run.
build/strata record -F 49 --sched "$T/s.json" -o "$T/c.folded" -- \
	perf bench sched pipe -l $((LOOPS * 10)) >/dev/null 2>&1 &
rec=$!
sleep 3
bpftool -j prog show 2>/dev/null | python3 -c '
import json, sys
for p in json.load(sys.stdin):
    if p.get("name") in ("on_switch", "on_wakeup") and p.get("run_cnt"):
        print("%s: %d runs, %.0f ns/run" % (p["name"], p["run_cnt"], p["run_time_ns"] / p["run_cnt"]))
' || true
wait "$rec" || true
