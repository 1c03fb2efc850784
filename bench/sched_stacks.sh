#!/usr/bin/env bash
# In-kernel cost of the scheduler layer's blocking-stack path, two builds
# side by side (e.g. before and after a change to bpf/sched.bpf.c): for
# each, `strata record --sched` on a context-switch ping-pong (`perf bench
# sched pipe`, both processes targets), and the run time per call of
# on_switch and on_wakeup from kernel.bpf_stats, runs interleaved.
#   bench/sched_stacks.sh BUILD_A BUILD_B [RUNS (3)] [STACK_NS]
# STACK_NS: the per-thread stack walk limit (STRATA_SCHED_STACK_NS; unset:
# the shipped 1 ms; 0: walk every block, the stack path's worst case).
set -euo pipefail
[ "$(id -u)" -eq 0 ] || { echo "bench: needs root"; exit 1; }
command -v perf > /dev/null || { echo "bench: needs perf (linux-perf)"; exit 1; }
A=$1 B=$2 RUNS=${3:-3}
if [ -n "${4:-}" ]; then export STRATA_SCHED_STACK_NS=$4; else unset STRATA_SCHED_STACK_NS; fi
sysctl -qw kernel.bpf_stats_enabled=1
T=$(mktemp -d /tmp/strata-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
one() { # BUILD: prints "on_switch NS on_wakeup NS"
	"$1/strata" record -F 49 --sched "$T/s.json" -o "$T/c.folded" -- \
		perf bench sched pipe -l 1500000 > /dev/null 2>&1 &
	local rec=$!
	sleep 5 # mid-run: the programs of this record are loaded and busy
	bpftool -j prog show 2> /dev/null | python3 -c '
import json, sys
print(" ".join("%s %.0f" % (p["name"], p["run_time_ns"] / p["run_cnt"])
               for p in json.load(sys.stdin)
               if p.get("name") in ("on_switch", "on_wakeup") and p.get("run_cnt")))'
	wait "$rec" || true
}
for ((r = 0; r < RUNS; r++)); do
	echo "A $(one "$A")"
	echo "B $(one "$B")"
done
