# The Grafana dashboard (deploy/grafana/) asks only for what strata-server
# exports: a server fed a 4-rank scenario with a straggler (gen_scenario
# --fault cpu: collectives, time breakdown, GPU allocations) is scraped,
# and every PromQL query of the dashboard must name series, labels and
# label values that the scrape has (grafana_check.py); promtool parses the
# queries.  A dashboard with a misspelt metric must fail the check.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/server_lib.sh"
SCEN=$ROOT/build/fixtures/gen_scenario
DASH=$ROOT/deploy/grafana/strata-overview.json
CHECK=$ROOT/tests/integration/grafana_check.py
[ -x "$SCEN" ] || fail "$SCEN not built (make fixtures)"

# scrape FAULT RANK: a fresh server fed one scenario, its /metrics appended
# to $T/metrics.txt.  Two scenarios (gen_scenario names its job
# "scenario"): a straggler (cpu) and a GPU leak, so that the leak-only
# series exist too.
scrape() {
	stop_server
	rm -rf "$T/server.db"* "$T/b" && mkdir -p "$T/b"
	PORT=$(free_port)
	# replayed data (minutes old): the windowed parts (breakdown, leaks) are
	# judged on query, as in test_server_diagnosis
	start_server "$PORT" --diag-window-ms 1000 --diag-delay-ms 500 --diag-on-query
	"$SCEN" "$T/b" --fault "$1" --rank "$2" --windows 12 --onset 2 > /dev/null
	for f in "$T"/b/*.zst; do
		curl -sf --data-binary @"$f" "http://127.0.0.1:$PORT/api/v1/batches" > /dev/null || fail "POST $f"
	done
	api "/api/v1/breakdown?job=scenario" > /dev/null || fail "breakdown"
	api "/api/v1/stragglers?job=scenario" > /dev/null || fail "stragglers"
	api "/api/v1/leak_reports?job=scenario" > /dev/null || fail "leak_reports"
	api /metrics >> "$T/metrics.txt" || fail "metrics"
}
scrape cpu 2
scrape leak 0

python3 "$CHECK" "$DASH" "$T/metrics.txt" "$T/rules.yml" || fail "dashboard queries a series the server does not export"
if command -v promtool > /dev/null; then
	promtool check rules "$T/rules.yml" > "$T/promtool.log" 2>&1 || { cat "$T/promtool.log"; fail "a dashboard query does not parse"; }
	echo "promtool: every query parses"
else
	echo "promtool not installed: PromQL syntax not checked"
fi

# the check can fail: a misspelt metric and a label the series lacks
sed -e 's/strata_gpu_outstanding_bytes{/strata_gpu_outstandng_bytes{/' \
	-e 's/category=\\"collective\\"/category=\\"colective\\"/' "$DASH" > "$T/bad.json"
python3 "$CHECK" "$T/bad.json" "$T/metrics.txt" > "$T/bad.log" && fail "a misspelt metric passed"
grep -q 'strata_gpu_outstandng_bytes is not exported' "$T/bad.log" || fail "misspelt metric not named: $(cat "$T/bad.log")"
grep -q 'category="colective"' "$T/bad.log" || fail "missing label value not named: $(cat "$T/bad.log")"
echo "ok: every dashboard query names series the server exports"
