# The straggler alert through the real monitoring chain on loopback, no
# stand-ins: strata-server fed a 4-rank job whose rank 2 is a straggler
# (gen_scenario --fault cpu) -> a real Prometheus (Debian package
# prometheus) scraping its /metrics every 1 s and evaluating the shipped
# rules (deploy/prometheus/strata-rules.yml) every 1 s -> a real
# Alertmanager (prometheus-alertmanager) -> its webhook receiver
# (webhook_receiver.py).  The receiver must get StrataStragglerConfirmed
# for job "scenario" rank 2, and only for that rank.
#
# The scrape sets honor_labels: true: the server's series carry a `job`
# label (the training job) that the rules group by; without it Prometheus
# renames that label exported_job and the alert names the scrape job.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/server_lib.sh"
command -v prometheus > /dev/null || skip "prometheus not installed (Debian package prometheus)"
AM=$(command -v prometheus-alertmanager || command -v alertmanager || true)
[ -n "$AM" ] || skip "alertmanager not installed (Debian package prometheus-alertmanager)"
SCEN=$ROOT/build/fixtures/gen_scenario
[ -x "$SCEN" ] || fail "$SCEN not built (make fixtures)"

PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null; wait "$p" 2> /dev/null || true; done; cleanup_server' EXIT
wait_http() { # URL WHAT PID LOG
	for _ in $(seq 150); do
		curl -sf -o /dev/null "$1" && return 0
		kill -0 "$3" 2> /dev/null || { tail -20 "$4"; fail "$2 exited"; }
		sleep 0.2
	done
	tail -20 "$4"
	fail "$2 did not answer at $1"
}

HOOK_PORT=$(free_port)
python3 "$ROOT/tests/integration/webhook_receiver.py" "$HOOK_PORT" "$T/hooks" > "$T/hook.log" 2>&1 &
PIDS+=($!)

PORT=$(free_port)
start_server "$PORT" --diag-window-ms 1000 --diag-delay-ms 500 --diag-on-query
mkdir -p "$T/b"
"$SCEN" "$T/b" --fault cpu --rank 2 --windows 12 --onset 2 > /dev/null
for f in "$T"/b/*.zst; do
	curl -sf --data-binary @"$f" "http://127.0.0.1:$PORT/api/v1/batches" > /dev/null || fail "POST $f"
done
api /metrics | grep -E '^strata_straggler_confirmed\{job="scenario".*rank="2".*\} 1$' ||
	fail "the server did not confirm the straggler (nothing for Prometheus to alert on)"

AM_PORT=$(free_port)
cat > "$T/am.yml" <<EOT
route:
  receiver: hook
  group_by: [alertname, job, rank]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: http://127.0.0.1:$HOOK_PORT/hook
        send_resolved: false
EOT
# --cluster.listen-address= : a single Alertmanager, no gossip port
"$AM" --config.file="$T/am.yml" --storage.path="$T/am" \
	--web.listen-address="127.0.0.1:$AM_PORT" --cluster.listen-address= > "$T/am.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$AM_PORT/-/ready" alertmanager "${PIDS[-1]}" "$T/am.log"

PROM_PORT=$(free_port)
cat > "$T/prom.yml" <<EOT
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $ROOT/deploy/prometheus/strata-rules.yml
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["127.0.0.1:$AM_PORT"]
scrape_configs:
  - job_name: strata-server
    honor_labels: true
    static_configs:
      - targets: ["127.0.0.1:$PORT"]
EOT
promtool check config "$T/prom.yml" > /dev/null || fail "prometheus config"
prometheus --config.file="$T/prom.yml" --storage.tsdb.path="$T/prom" \
	--web.listen-address="127.0.0.1:$PROM_PORT" > "$T/prom.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$PROM_PORT/-/ready" prometheus "${PIDS[-1]}" "$T/prom.log"
start=$(date +%s.%N)

# scrape -> rule evaluation -> Alertmanager (group_wait 1 s) -> webhook
for _ in $(seq 300); do
	grep -q StrataStragglerConfirmed "$T/hooks" 2> /dev/null && break
	sleep 0.1
done
[ -s "$T/hooks" ] || {
	curl -s "http://127.0.0.1:$PROM_PORT/api/v1/alerts"
	curl -s "http://127.0.0.1:$PROM_PORT/api/v1/targets" | head -c 600
	tail -5 "$T/prom.log" "$T/am.log"
	fail "no alert reached the webhook in 30 s"
}
sleep 3 # a second, wrong, alert would arrive within group_interval
python3 - "$T/hooks" "$start" <<'EOF' || fail "wrong alert delivered"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
alerts = []
for line in lines:
    at, body = line.split(' ', 1)
    alerts += [(float(at), a) for a in json.loads(body)['alerts']]
names = {a['labels']['alertname'] for _, a in alerts}
strag = [(at, a) for at, a in alerts if a['labels']['alertname'] == 'StrataStragglerConfirmed']
assert strag, names
ranks = {(a['labels'].get('job'), a['labels'].get('rank')) for _, a in strag}
assert ranks == {('scenario', '2')}, ranks
at, a = strag[0]
assert a['status'] == 'firing', a
assert a['labels']['node'] == 'node-2' and a['labels']['severity'] == 'warning', a['labels']
assert 'Rank 2 of job scenario' in a['annotations']['summary'], a['annotations']
print(f"alerts delivered: {sorted(names)}; StrataStragglerConfirmed job=scenario rank=2 "
      f"{at - float(sys.argv[2]):.1f} s after Prometheus started")
EOF
echo "ok: Prometheus (shipped rules) -> Alertmanager -> webhook delivered the straggler alert"
