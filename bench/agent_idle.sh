#!/usr/bin/env bash
# The agent's own CPU on a node at rest, two builds side by side in one run
# (same host, same moment, so host noise hits both alike): each
# strata-agent host-wide with the DaemonSet's args, sending to its own
# strata-server with the server's defaults.  WATCHED=N first starts N
# long-lived Python processes (PyTorch imported where Debian's python3-torch
# is installed: ~1,700 mappings each, as a training job's DataLoader
# workers have) that run long enough to be sampled and then sleep: what an
# agent does for processes it watches but that never call CUDA.  Prints
# each agent's CPU seconds per minute over MEAS_S after a WARM_S warm-up.
#   bench/agent_idle.sh OLD_BUILD_DIR NEW_BUILD_DIR   (e.g. a worktree's build/)
#   env: WATCHED (default 4), WARM_S (default 30), MEAS_S (default 120),
#   IDLE_PROCS (default 0: processes that only sleep, never sampled, as a
#   node's daemons, shells and containers' processes are: a node has
#   hundreds to thousands)
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1 NEW=$2
WATCHED=${WATCHED:-4} WARM_S=${WARM_S:-30} MEAS_S=${MEAS_S:-120} IDLE_PROCS=${IDLE_PROCS:-0}
[ "$(id -u)" -eq 0 ] || { echo "bench: needs root"; exit 1; }
T=$(mktemp -d /tmp/strata-bench-idle.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null; rm -rf "$T"' EXIT
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf 2>/dev/null || true

py=/usr/bin/python3
imp="import torch"
$py -c "$imp" 2>/dev/null || imp="import json, ssl, sqlite3, decimal, ctypes"
for _ in $(seq "$WATCHED"); do
	# spins 3 s (sampled: the agents watch it), then sleeps
	$py -c "$imp
import time
end = time.time() + 3
while time.time() < end: pass
time.sleep(100000)" &
done

for _ in $(seq "$IDLE_PROCS"); do sleep 100000 & done

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
declare -A agent c0
port=47700
for w in old new; do
	b=$OLD
	[ $w = new ] && b=$NEW
	port=$((port + 1))
	"$b/strata-server" --listen "127.0.0.1:$port" --store "sqlite:$T/$w.db" 2> "$T/$w.server.log" &
	sleep 0.3
	"$b/strata-agent" --server "http://127.0.0.1:$port" --spool "$T/$w.spool" --spool-max 512 \
		--period 10 --freq 49 -v 2> "$T/$w.agent.log" &
	agent[$w]=$!
done
sleep "$WARM_S"
for w in old new; do c0[$w]=$(cpu_ticks "${agent[$w]}"); done
sleep "$MEAS_S"
tck=$(getconf CLK_TCK)
echo "| agent ($WATCHED watched processes, $IDLE_PROCS idle ones, ${MEAS_S} s after ${WARM_S} s) | CPU s per minute | share of one CPU |"
echo "|---|---|---|"
for w in old new; do
	d=$(($(cpu_ticks "${agent[$w]}") - c0[$w]))
	b=$OLD
	[ $w = new ] && b=$NEW
	python3 -c "import sys; s = $d / $tck; print('| %s | %.3f | %.2f%% |' % (sys.argv[1], s * 60 / $MEAS_S, 100 * s / $MEAS_S))" "$w: $b"
done
for w in old new; do kill -INT "${agent[$w]}"; done
wait "${agent[old]}" "${agent[new]}" 2>/dev/null || true
for w in old new; do
	grep -o 'watched=[0-9]* exits=[0-9]* scans=[0-9]*' "$T/$w.agent.log" | tail -1 | sed "s/^/$w: /"
	grep -o 'sched targets: scans=[0-9]* examined=[0-9]*' "$T/$w.agent.log" | tail -1 | sed "s/^/$w: /"
done
