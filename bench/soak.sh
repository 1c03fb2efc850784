#!/usr/bin/env bash
# The agent's soak: strata-agent host-wide with the DaemonSet's arguments
# (deploy/kubernetes/base/agent-daemonset.yaml), shipping to a local
# strata-server, for MINUTES while the host churns:
#   - STARTS processes a minute (tests/fixtures/spawner running /bin/true:
#     each an exec and an exit event, a process-tracker instance),
#   - a training job (train_sim, 2 ranks, on the stand-in CUDA/NCCL
#     libraries: probes, call-site stacks, collectives),
#   - a churn of shared libraries (truncator --churn: a new file mapped,
#     used and deleted every 100 ms: the module registry must evict them).
# Every minute it prints the agent's RSS and the CPU it used; at the end the
# RSS growth after the first WARMUP minutes (the bound: <= 5%), the starts
# achieved and the agent's own counters.  Exits 1 when the bound is broken.
#   [SOAK_LOADS=starts,churn,train] bench/soak.sh [MINUTES (30)] [STARTS per minute (10000)] [WARMUP minutes (5)]
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-30}
STARTS=${2:-10000}
WARMUP=${3:-5}
[ "$(id -u)" -eq 0 ] || { echo "soak: needs root"; exit 1; }
[ "$WARMUP" -lt "$MINUTES" ] || { echo "soak: WARMUP must be shorter than MINUTES"; exit 2; }
T=$(mktemp -d /tmp/strata-soak.XXXXXX)
FIX=build/fixtures
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -- "-$p" 2> /dev/null || kill "$p" 2> /dev/null || true; done
	wait 2> /dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
build/strata-server --listen "127.0.0.1:$port" --store "sqlite:$T/server.db" --no-debuginfod \
	> "$T/server.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:$port/healthz" > /dev/null 2>&1 && break
	sleep 0.1
done
setsid ${SOAK_WRAP:-} build/strata-agent --server "http://127.0.0.1:$port" --spool "$T/spool" --spool-max 512 \
	--period 10 --freq 49 -v 2> "$T/agent.log" &
AGENT=$!
PIDS+=($AGENT)
for _ in $(seq 600); do
	grep -q 'agent: sampling at' "$T/agent.log" && break
	sleep 0.1
done
secs=$((MINUTES * 60))
mkdir "$T/libs"
# SOAK_LOADS: which of the three loads run (to tell which one an RSS
# growth follows)
LOADS=${SOAK_LOADS:-starts,churn,train}
if [[ ,$LOADS, == *,starts,* ]]; then
	setsid "$FIX/spawner" "$STARTS" "$secs" /bin/true > "$T/spawner.out" &
	PIDS+=($!)
fi
if [[ ,$LOADS, == *,churn,* ]]; then
	setsid "$FIX/truncator" --churn build/strata-server "$T/libs" "$secs" > "$T/churn.out" &
	PIDS+=($!)
fi
if [[ ,$LOADS, == *,train,* ]]; then
	SIM_KERNEL_US=200 SIM_PREP_US=2000 setsid "$FIX/train_sim" 2 100000000 > "$T/train.out" 2>&1 &
	PIDS+=($!)
fi

tck=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$AGENT/stat"; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$AGENT/status"; }
echo "soak: $MINUTES min, $STARTS starts/min, agent pid $AGENT (RSS growth measured after minute $WARMUP)"
printf '%6s %10s %8s %8s\n' minute rss_kb cpu_s cpu_pct
prev=$(cpu_ticks)
base=
for m in $(seq "$MINUTES"); do
	sleep 60
	kill -0 "$AGENT" 2> /dev/null || { tail -20 "$T/agent.log"; echo "soak: the agent died"; exit 1; }
	now=$(cpu_ticks)
	rss=$(rss_kb)
	awk -v m="$m" -v r="$rss" -v d="$((now - prev))" -v t="$tck" \
		'BEGIN { printf "%6d %10d %8.2f %7.2f%%\n", m, r, d / t, 100 * d / t / 60 }'
	prev=$now
	[ "$m" -eq "$WARMUP" ] && base=$rss
	last=$rss
done
kill -INT "$AGENT"
for _ in $(seq 300); do kill -0 "$AGENT" 2> /dev/null || break; sleep 0.1; done
cat "$T/spawner.out" "$T/churn.out" 2> /dev/null || true
grep -E '^  (procs:|modules=|unwind tables:|batches:|upload:)' "$T/agent.log" | tail -6
growth=$(awk -v b="$base" -v l="$last" 'BEGIN { printf "%.2f", 100 * (l - b) / b }')
echo "soak: RSS ${base} kB at minute $WARMUP -> ${last} kB at minute $MINUTES: ${growth}% (bound 5%)"
awk -v g="$growth" 'BEGIN { exit !(g <= 5) }' || { echo "soak: FAIL: RSS grew ${growth}%"; exit 1; }
echo "soak: ok"
