# test_server_clickhouse.sh with strata-server --clickhouse-cluster on a
# 2-shard ClickHouse cluster (tests/integration/clickhouse.sh, CH_SHARDS).
CH_SHARDS=2 exec bash "$(dirname "$0")/test_server_clickhouse.sh"
