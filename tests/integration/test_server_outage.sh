# Outage: strata-server is stopped while the agent ships, then restarted.
# Every batch the agent built arrives exactly once: batch counts and sample
# totals are equal on both sides, the spool ends empty, and the agent saw
# failures (so the outage really happened).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/server_lib.sh"
require_bpf

PORT=$(free_port)
start_server "$PORT"
"$AGENT" --server "http://127.0.0.1:$PORT" --period 1 -F 99 --spool "$T/spool" \
	--node outage-node -v 2> "$T/agent.log" &
AGENT_PID=$!
"$FIX/chain" 9 &
LOAD=$!
sleep 2.5
stop_server
echo "server down"
sleep 4
start_server "$PORT"
echo "server up again"
wait "$LOAD"
sleep 1
kill -INT "$AGENT_PID"
wait "$AGENT_PID" || fail "agent failed: $(tail -5 "$T/agent.log")"
AGENT_PID=

final=$(grep -E '^agent: final batches:' "$T/agent.log" | tail -1)
up=$(grep -E '^  upload: ' "$T/agent.log" | tail -1)
echo "$final"
echo "agent: $up"
dropped=$(sed -n 's/.*rows_dropped=\([0-9]*\).*/\1/p' <<< "$final")
failures=$(sed -n 's/.*failures=\([0-9]*\).*/\1/p' <<< "$up")
[ "$dropped" -eq 0 ] || fail "the batch builder dropped $dropped samples"
[ "$failures" -gt 0 ] || fail "the agent never saw the outage"
[ "$(spooled_batches "$T/spool")" = 0 ] || fail "batches left in the spool: $(ls "$T/spool")"

assert_stored_once outage-node "$final"
echo "ok: $STORED_BATCHES batches and $STORED_SAMPLES samples, each stored exactly once"

# The agent is gone; a restarted server still knows the node from its store
# (StrataAgentDown goes on firing for it instead of losing the series).
stop_server
start_server "$PORT"
api /metrics > "$T/metrics.txt"
grep -E '^strata_agent_last_batch_timestamp_seconds\{node="outage-node"\} [0-9]{10}\.[0-9]{3}$' \
	"$T/metrics.txt" || fail "the restarted server lost the node: $(grep strata_agent_ "$T/metrics.txt")"
echo "ok: the restarted server knows outage-node"
