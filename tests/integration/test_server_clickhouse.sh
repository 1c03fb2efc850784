# End to end on loopback with the ClickHouse store: strata-agent ships
# batches (no symbol names) to strata-server --store clickhouse://..., and
# the server's folded export for the workload holds its call chain,
# symbolized centrally.  With CH_SHARDS=2 (test_server_clickhouse_cluster.sh)
# the store is a 2-shard cluster (--clickhouse-cluster).  Skips until strata-server and the agent's uploader
# are built in this tree (branches server/uploader), or when ClickHouse
# cannot run.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/integration/clickhouse.sh"
SERVER=$ROOT/build/strata-server
[ -x "$SERVER" ] || skip "build/strata-server not built in this tree yet"
require_bpf
ch_start

head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$T/token"
cluster=()
[ -n "$CH_STORE_QUERY" ] && cluster=(--clickhouse-cluster "$CH_CLUSTER")
"$SERVER" --listen 127.0.0.1:0 --store "clickhouse://$CH_STORE_HOSTS/strata_e2e" "${cluster[@]}" \
	--token-file "$T/token" --buildid-dir "$T/buildids" > "$T/server.log" 2>&1 &
srv=$!
port=
for _ in $(seq 1 100); do
	port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$T/server.log")
	[ -n "$port" ] && break
	kill -0 "$srv" 2>/dev/null || { cat "$T/server.log"; fail "strata-server exited"; }
	sleep 0.1
done
[ -n "$port" ] || { cat "$T/server.log"; fail "strata-server did not report its port"; }
URL=http://127.0.0.1:$port
curl -sf "$URL/healthz" > /dev/null || fail "/healthz"

"$FIX/chain" 6 &
w=$!
"$AGENT" --server "$URL" --token-file "$T/token" --period 2 --spool "$T/spool" > "$T/agent.log" 2>&1 &
a=$!
sleep 7
kill -TERM "$a"
wait "$a" || { tail "$T/agent.log"; fail "agent exited with $?"; }
wait "$w"

auth=(-H "Authorization: Bearer $(cat "$T/token")")
# Unauthenticated queries are refused.
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/api/v1/profile?format=folded&pid=$w")
[ "$code" = 401 ] || [ "$code" = 403 ] || fail "query without token answered $code"
curl -sf "${auth[@]}" "$URL/api/v1/profile?format=folded&pid=$w" > "$T/folded" ||
	{ tail "$T/server.log"; fail "profile query"; }
chain=$(folded_sum "$T/folded" "" ';main;a;b;c(;|$)')
total=$(folded_sum "$T/folded" "" '')
[ "$chain" -gt 50 ] || { head -20 "$T/folded"; fail "only $chain chain samples of $total in ClickHouse"; }
echo "ok: $chain of $total samples of pid $w carry main;a;b;c, symbolized by the server, stored in ClickHouse"
# The rows really are in ClickHouse.
rows=$(ch_query "SELECT count() FROM strata_e2e.cpu_samples WHERE pid = $w")
[ "$rows" -gt 0 ] || fail "no cpu_samples rows for pid $w in ClickHouse"
if [ -n "$CH_STORE_QUERY" ]; then
	# The node's rows are on one shard (its node's), all of them.
	IFS=, read -r -a hosts <<< "$CH_HOSTS"
	local_rows=0
	for h in "${hosts[@]}"; do
		n=$(CH_URL=http://$h ch_query "SELECT count() FROM strata_e2e.cpu_samples_local WHERE pid = $w")
		echo "shard $h: $n cpu_samples rows of pid $w"
		local_rows=$((local_rows + n))
	done
	[ "$local_rows" = "$rows" ] || fail "shards hold $local_rows rows, the Distributed table $rows"
fi
kill -TERM "$srv"
wait "$srv" || true
echo "ok: $rows cpu_samples rows in ClickHouse"
