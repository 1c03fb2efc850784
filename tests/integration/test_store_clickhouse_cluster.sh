# test_store_clickhouse.sh against a 2-shard ClickHouse cluster (two
# private clickhouse-servers, local MergeTree tables on each, Distributed
# tables over them: tests/integration/clickhouse.sh, CH_SHARDS), plus
# exactly-once ingest through either server and rows on both shards
# (test_store_clickhouse's test_either_server).
CH_SHARDS=2 exec bash "$(dirname "$0")/test_store_clickhouse.sh"
