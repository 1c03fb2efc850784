# server/clickhouse_http.c against a real ClickHouse: round trip of every
# byte value, injection stays data, server errors (also mid-result),
# result size limit, timeout, connection refused.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/integration/clickhouse.sh"
bin=$ROOT/build/tests/test_clickhouse_http
[ -x "$bin" ] || fail "$bin not built (make unit)"
ch_start
STRATA_TEST_CLICKHOUSE=$CH_URL "$bin" > "$T/out" 2>&1 || { cat "$T/out"; fail "unit tests against ClickHouse"; }
cat "$T/out"
grep -q 'SKIPPED' "$T/out" && fail "tests skipped although ClickHouse runs"
echo "ok: clickhouse_http against $CH_URL"
