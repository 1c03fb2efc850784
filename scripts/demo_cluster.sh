#!/usr/bin/env bash
# The cluster story of `make demo` (run by scripts/demo.sh, as root):
# strata-server on SQLite, strata-agent shipping to it, a simulated 4-rank
# training job (build/fixtures/train_sim on the stand-in CUDA/NCCL
# libraries) whose rank 2 computes 2x slower from 3 s on.  Waits for the
# server to confirm the straggler, then prints the job page URL and the
# diagnosis: stragglers, rank 2's top findings, the time breakdown.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/demo/cluster
rm -rf "$out" && mkdir -p "$out"
port=${DEMO_PORT:-8077}
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -INT "$p" 2> /dev/null || true; done
	wait 2> /dev/null || true
}
trap cleanup EXIT
api() { curl -sf "http://127.0.0.1:$port$1"; }

build/strata-server --listen "127.0.0.1:$port" --store "sqlite:$out/strata.db" --no-debuginfod \
	--diag-window-ms 2000 > "$out/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do api /healthz > /dev/null 2>&1 && break; sleep 0.1; done
mkfifo "$out/go"
SIM_INIT_MS=400 SIM_KERNEL_US=1000 SIM_SLOW_RANK=2 SIM_SLOWDOWN=2 SIM_FAULT_AFTER_MS=3000 \
	setsid bash -c 'read -r _ < "$1"; exec build/fixtures/train_sim 4 100000' _ "$out/go" \
	> "$out/train.out" 2>&1 &
job=$!
build/strata-agent --server "http://127.0.0.1:$port" --period 1 --spool "$out/spool" \
	--node demo-node --pid "$job" --drain-interval 250 2> "$out/agent.log" &
pids+=($!)
sleep 1.5
echo go > "$out/go"
echo "demo: strata-server :$port (SQLite $out/strata.db), strata-agent, train_sim: 4 ranks,"
echo "      rank 2's kernels 2x slower from 3 s on (SIM_SLOW_RANK=2 SIM_SLOWDOWN=2)"
for _ in $(seq 60); do
	sleep 1
	j=$(api /api/v1/jobs | python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"]; print(j[0]["job"] if j else "")')
	[ -n "$j" ] && api "/api/v1/stragglers?job=$j" | grep -q '"rank"' && break
done
kill -TERM -- "-$job" 2> /dev/null || true
[ -n "$j" ] || { echo "demo: the job never reported (see $out/*.log)"; exit 1; }
api "/api/v1/stragglers?job=$j" > "$out/stragglers.json"
rank=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s[0]["rank"] if s else -1)' "$out/stragglers.json")
api "/api/v1/findings?job=$j&rank=$rank" > "$out/findings.json" || echo '[]' > "$out/findings.json"
api "/api/v1/breakdown?job=$j" > "$out/breakdown.json" || echo '[]' > "$out/breakdown.json"
echo
echo "demo: job page  http://127.0.0.1:$port/jobs/$j  (the server stops with the demo;"
echo "      rerun it: build/strata-server --listen 127.0.0.1:$port --store sqlite:$out/strata.db)"
python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
st = json.load(open(d + '/stragglers.json'))
print('\nstragglers:')
for s in st:
    print('  rank %d  node %s  pid %d  lag %.1f ms  score %.2f  communicator %s' %
          (s['rank'], s['node'], s['pid'], s['lag_seconds'] * 1e3, s['score'], s['communicator']))
if not st:
    print('  none confirmed (yet)')
print('\ntop findings for the straggler (rank vs peer median):')
for f in json.load(open(d + '/findings.json'))[:5]:
    print('  %-6s %-22s %10.3f vs %10.3f  score %5.1f  %s' %
          (f['layer'], f['metric'], f['value'], f['peer_median'], f['score'],
           (f['evidence'] or [''])[0][:70]))
bd = json.load(open(d + '/breakdown.json'))
print('\ntime breakdown of each rank\'s main thread (seconds):')
if not bd:
    print('  (needs the scheduler layer on the wire)')
for r in sorted(bd, key=lambda r: r['rank']):
    print('  rank %d: ' % r['rank'] + ' '.join('%s %.1f' % kv for kv in r['seconds'].items() if kv[1] >= 0.05))
PY
