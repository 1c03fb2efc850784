# server/clickhouse_http.c against a real ClickHouse: round trip of every
# byte value, injection stays data, server errors (also mid-result),
# result size limit, timeout, connection refused.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/integration/clickhouse.sh"
ch_start
ch_run_unit test_clickhouse_http
