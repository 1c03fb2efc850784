# Server-side diagnosis over synthetic 4-rank jobs (tests/fixtures/gen_scenario.c,
# no agent): for each injected fault the server must name the right rank
# and layer: /api/v1/stragglers, /api/v1/findings, /api/v1/breakdown,
# /api/v1/leak_reports, /metrics (docs/metrics.md names) and the
# Alertmanager webhook (a local receiver records the POSTs).  Prints, per
# scenario: detected rank, layer, and seconds of data time from the fault
# onset to the confirmation (the sequential test at ingest decides on the
# collective that completes the evidence).  The batches are replayed data
# (2 minutes old), so the windowed parts (breakdown, leaks, findings) are
# judged on query only (--diag-on-query); /api/v1/stragglers with from/to
# judges the stored range again and must find the same episode.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/integration/server_lib.sh"
SCEN=$ROOT/build/fixtures/gen_scenario
[ -x "$SCEN" ] || fail "$SCEN not built (make fixtures)"

# webhook receiver: appends each POST body as one line to $T/hooks
HOOK_PORT=$(free_port)
python3 "$ROOT/tests/integration/webhook_receiver.py" "$HOOK_PORT" "$T/hooks" > "$T/hook.log" 2>&1 &
HOOK_PID=$!
trap 'kill $HOOK_PID 2>/dev/null; cleanup_server' EXIT

run_scenario() { # FAULT RANK EXPECTED_LAYER
	local fault=$1 rank=$2 layer=$3 onset
	stop_server
	rm -rf "$T/server.db"* "$T/hooks"
	rm -rf "$T/b" && mkdir -p "$T/b"
	PORT=$(free_port)
	start_server "$PORT" --diag-window-ms 1000 --diag-delay-ms 500 --diag-on-query \
		--alert-webhook "http://127.0.0.1:$HOOK_PORT/hook"
	onset=$("$SCEN" "$T/b" --fault "$fault" --rank "$rank" --windows 12 --onset 2)
	for f in "$T"/b/*.zst; do
		curl -sf --data-binary @"$f" "http://127.0.0.1:$PORT/api/v1/batches" > /dev/null ||
			fail "$fault: POST $f"
	done
	api "/api/v1/stragglers?job=scenario&all=1" > "$T/str.json" || fail "$fault: stragglers"
	api "/api/v1/stragglers?job=scenario&from=$((onset / 1000000000 - 10))&to=$((onset / 1000000000 + 30))" \
		> "$T/past.json" || fail "$fault: stragglers from/to"
	api "/api/v1/breakdown?job=scenario" > "$T/bd.json" || fail "$fault: breakdown"
	api "/api/v1/leak_reports?job=scenario" > "$T/leaks.json" || fail "$fault: leak_reports"
	api "/metrics" > "$T/metrics.txt" || fail "$fault: metrics"
	curl -s "http://127.0.0.1:$PORT/api/v1/findings?job=scenario&rank=$rank" > "$T/find.json"
	curl -sf "http://127.0.0.1:$PORT/jobs/scenario" > "$T/page.html" || fail "$fault: job page"
	python3 - "$fault" "$rank" "$layer" "$onset" "$T" <<'EOF' || fail "$fault: diagnosis wrong"
import json, sys, os, re
fault, rank, layer, onset, T = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
st = json.load(open(T + '/str.json'))
conf = [s for s in st if s['state'] == 'confirmed']
bd = json.load(open(T + '/bd.json'))
leaks = json.load(open(T + '/leaks.json'))
metrics = open(T + '/metrics.txt').read()
page = open(T + '/page.html').read()
hooks = open(T + '/hooks').read().splitlines() if os.path.exists(T + '/hooks') else []
assert len(bd) == 4, bd
for r in bd:   # every category present, sum = the main thread's wall time
    assert abs(sum(r['seconds'].values()) - r['wall_seconds']) < 1e-6, r
    assert 11.9 < r['wall_seconds'] < 12.1, r
assert metrics.count('strata_rank_time_seconds_total{job="scenario"') == 32, 'breakdown counters'
if fault in ('none', 'leak'):
    assert not conf, ('false straggler', conf)
    assert json.load(open(T + '/past.json')) == [], 'false straggler in the past range'
    assert not hooks, hooks
    assert 'strata_straggler_confirmed{' not in metrics or \
        not re.search(r'strata_straggler_confirmed\{[^}]*\} 1$', metrics, re.M)
if fault == 'none':
    assert not leaks, leaks
    print(f'scenario none: no straggler, no leak, breakdown {len(bd)} ranks')
    sys.exit(0)
if fault == 'leak':
    assert len(leaks) == 1 and leaks[0]['rank'] == rank and 'leaky_site' in leaks[0]['stack'], leaks
    g = leaks[0]['growth_bytes_per_second']
    assert 30e6 < g < 36e6, g   # 32 MiB per 1 s window
    assert re.search(r'strata_gpu_leak_growth_bytes_per_second\{job="scenario",node="node-%d"' % rank, metrics)
    assert 'leaky_site' in page
    # detected when the tracker had min_windows (6) points: data time
    print(f'scenario leak: detected rank {leaks[0]["rank"]} layer cuda (leak, stack leaky_site, '
          f'{g/2**20:.1f} MiB/s), alert after {leaks[0]["windows"]} windows of growth')
    sys.exit(0)
assert len(conf) == 1 and conf[0]['rank'] == rank, conf
s = conf[0]
assert 0.010 < s['lag_seconds'] < 0.014, s
assert re.search(r'strata_straggler_confirmed\{job="scenario",communicator="c0ffee0012345678",rank="%d",node="node-%d",pid="%d"\} 1$' % (rank, rank, 1000 + rank), metrics, re.M), 'metric'
find = json.load(open(T + '/find.json'))
assert find and find[0]['layer'] == layer, (layer, find)
top = find[0]
# alert: the webhook fired once for this rank; time from onset = confirmation
# (end of the 3rd hot window) - onset, in data time
assert len(hooks) == 1, hooks
h = json.loads(hooks[0].split(' ', 1)[1])
assert h['status'] == 'firing' and h['alerts'][0]['labels']['rank'] == str(rank), h
past = json.load(open(T + '/past.json'))
assert len(past) == 1 and past[0]['rank'] == rank and past[0]['until'] is None, past
assert abs(past[0]['decided_at'] - s['decided_at']) < 0.001, (past, s)
print(f'scenario {fault}: detected rank {s["rank"]} layer {top["layer"]} ({top["metric"]} '
      f'{top["value"]:.3f} vs {top["peer_median"]:.3f}), lag {s["lag_seconds"]*1e3:.1f} ms, '
      f'alert {s["decided_at"] - onset/1e9:.1f} s after onset (data time, '
      f'{s["collectives"]} collectives judged)')
assert 'rank %d' % rank in page and top['metric'] in page
EOF
}

run_scenario none 1 -
run_scenario cpu 2 cpu
run_scenario io 1 os
run_scenario compute 3 cuda
run_scenario leak 0 cuda
echo "ok: server diagnosis names the rank and layer in every scenario"
