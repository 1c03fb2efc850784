#!/usr/bin/env bash
# The cluster story of `make demo` (run by scripts/demo.sh, as root):
# strata-server on SQLite, strata-agent shipping to it, a simulated 4-rank
# training job (build/fixtures/train_sim on the stand-in CUDA/NCCL
# libraries) whose rank 2 computes 2x slower from 3 s on, and beside it a
# 4-rank Python job on the stand-in NCCL (tests/fixtures/py_nccl_job.py)
# whose rank 2 blocks reading its input (a FIFO nobody writes) before
# collective 30: an NCCL hang.  Waits for the server to confirm the
# straggler and decide the hang, then prints the job pages and the
# diagnosis: stragglers, rank 2's top findings, the time breakdown, the
# collective table of the training job, and the hang (who waits, who is
# missing, what it is doing).
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
mkfifo "$out/go" "$out/source"
# both jobs in one process group, followed by one agent (--pid)
SIM_INIT_MS=400 SIM_KERNEL_US=1000 SIM_SLOW_RANK=2 SIM_SLOWDOWN=2 SIM_FAULT_AFTER_MS=3000 \
	setsid bash -c 'read -r _ < "$1"
	STRATA_JOB=demo-train build/fixtures/train_sim 4 100000 > "$2/train.out" 2>&1 &
	STRATA_JOB=demo-hang PY_NCCL_INIT_S=1.5 HANG_MODE=io HANG_RANK=2 HANG_STEP=30 \
		HANG_FIFO="$2/source" python3 tests/fixtures/py_nccl_job.py \
		build/fixtures/libnccl.so 4 100000 > "$2/hang.out" 2>&1 &
	wait' _ "$out/go" "$out" &
job=$!
build/strata-agent --server "http://127.0.0.1:$port" --period 1 --spool "$out/spool" \
	--node demo-node --pid "$job" --drain-interval 250 2> "$out/agent.log" &
pids+=($!)
sleep 1.5
echo go > "$out/go"
echo "demo: strata-server :$port (SQLite $out/strata.db), strata-agent, and two jobs:"
echo "      demo-train: train_sim, 4 ranks, rank 2's kernels 2x slower from 3 s on"
echo "                  (SIM_SLOW_RANK=2 SIM_SLOWDOWN=2)"
echo "      demo-hang:  4 Python ranks on NCCL, rank 2 blocks reading its input"
echo "                  before collective 30 (HANG_MODE=io)"
j=demo-train h=demo-hang
straggler='' hang=''
for _ in $(seq 60); do
	sleep 1
	if [ -z "$straggler" ] && api "/api/v1/stragglers?job=$j" | grep -q '"rank"'; then straggler=1; fi
	if [ -z "$hang" ] && api "/api/v1/hangs?job=$h" | grep -q '"missing"'; then hang=1; fi
	[ -n "$straggler" ] && [ -n "$hang" ] && break
done
kill -TERM -- "-$job" 2> /dev/null || true
api /api/v1/jobs | grep -q "\"$j\"" || { echo "demo: the job never reported (see $out/*.log)"; exit 1; }
api "/api/v1/stragglers?job=$j" > "$out/stragglers.json"
api "/api/v1/collective_stats?job=$j" > "$out/collectives.json" || echo '[]' > "$out/collectives.json"
api "/api/v1/hangs?job=$h" > "$out/hangs.json" || echo '[]' > "$out/hangs.json"
rank=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s[0]["rank"] if s else -1)' "$out/stragglers.json")
api "/api/v1/findings?job=$j&rank=$rank" > "$out/findings.json" || echo '[]' > "$out/findings.json"
api "/api/v1/breakdown?job=$j" > "$out/breakdown.json" || echo '[]' > "$out/breakdown.json"
echo
echo "demo: job pages http://127.0.0.1:$port/jobs/$j  http://127.0.0.1:$port/jobs/$h"
echo "      (the server stops with the demo;"
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
cs = json.load(open(d + '/collectives.json'))
print('\ncollectives of demo-train (per communicator, op and size class; most total stall first):')
if not cs:
    print('  none judged yet (a window is judged one window after it ends)')
else:
    print('  %-10s %9s %5s %6s %10s %10s %12s %10s %12s' % ('op', 'size', 'ranks', 'count', 'observed',
          'stall', 'total stall', 'slack', 'bus GB/s'))
for c in cs[:6]:
    print('  %-10s %8.0fK %5d %6d %8.2fms %8.2fms %11.2fs %8.2fms %12.2f' %
          (c['op'], c['bytes'] / 1024, c['nranks'], c['occurrences'], c['observed_seconds'] * 1e3,
           c['stall_seconds'] * 1e3, c['total_stall_seconds'], c['slack_seconds'] * 1e3,
           c['bus_bandwidth'] / 1e9))
hs = json.load(open(d + '/hangs.json'))
print('\nNCCL hangs of demo-hang:')
if not hs:
    print('  none decided (yet)')
for h in hs:
    print('  %s: %s #%d (%d B) of communicator %s, threshold %.1f s' %
          (h['kind'], h['op'], h['seq'], h['bytes'], h['communicator'], h['threshold_seconds']))
    w = h['waiting']
    if w:
        print('    waiting since %.1f s: ranks %s' % (h['as_of'] - h['since'], ', '.join(str(r['rank']) for r in w)))
    for m in h['missing']:
        last = m.get('last_collective') or {}
        print('    missing: rank %d (pid %s): last collective #%s, now %s%s' %
              (m['rank'], m.get('pid', '?'), last.get('seq', '-'), m['state'],
               ' (%s)' % m['reason'] if m.get('reason') else ''))
        t = m.get('thread') or {}
        if t.get('wchan') or t.get('kernel_stack'):
            print('      thread %s, waits in %s; kernel stack %s' %
                  (t.get('state', ''), t.get('wchan', ''), t.get('kernel_stack', '')[-90:]))
        if m.get('cpu_stack'):
            print('      CPU stack (its last 10 s): %s' % m['cpu_stack'][-110:])
    for m in h.get('mismatched', []):
        print('    mismatched: rank %d called %s of %d B' % (m['rank'], m.get('op', '?'), m.get('bytes', 0)))
PY
