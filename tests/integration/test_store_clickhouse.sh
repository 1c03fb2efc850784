# server/store/clickhouse*.c against a real ClickHouse (Debian's 18.16,
# started privately): synthetic batches through the store interface, every
# query, filters, exactly-once ingest, leaks, tally, events, retention by
# partition, concurrent ingest (tests/unit/test_store_clickhouse.c), and
# the diagnosis inputs (test_store_diag_inputs.c, test_store_cpu_layer.c)
# collective health (test_store_collstats.c), deep-capture records
# (test_capture.c), and a database an older server made gaining the
# columns it lacks (test_store_migrate.c), and what a replica's hang
# detection reads back (test_store_hang_inputs.c).
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/integration/clickhouse.sh"
ch_start
ch_run_unit test_store_clickhouse
ch_run_unit test_store_diag_inputs
ch_run_unit test_store_cpu_layer
ch_run_unit test_store_collstats
ch_run_unit test_capture
ch_run_unit test_store_migrate
ch_run_unit test_store_hang_inputs
