#!/usr/bin/env bash
# strata-server ingest benchmark, on this machine:
#   1. ingest: batches/s and samples/s for synthetic realistic batches (one
#      training node's 10 s: 8 ranks x 4 threads x 49 Hz, 1500 distinct
#      stacks 40 frames deep) from 8 nodes in turn, POSTed by 2 client
#      threads with keep-alive, into each store in the same run with the
#      same generator: SQLite, a single-node ClickHouse and a 2-shard
#      ClickHouse cluster (private clickhouse-servers on loopback, as
#      tests/integration/clickhouse.sh starts them; skipped if not
#      installed).  Also per server core: batches and samples per second
#      of the strata-server process's CPU time (utime+stime from /proc;
#      ClickHouse's own CPU, all its servers, is reported beside it, not
#      included);
#   1b. query latency (ClickHouse, single node and 2 shards): one job's
#      flamegraph over one hour of QUERY_NODES nodes (default 100): one
#      node's hour (360 batches) ingested through the server, copied in
#      ClickHouse to the other nodes (rows and commit records, node and
#      batch renamed: the same stacks), then GET /api/v1/profile
#      ?format=folded&job=...&from=...&to=... timed (first, then the
#      median of 3) at 10 nodes and at QUERY_NODES, and the store's SQL
#      for it straight to ClickHouse (result bytes, time), grouped as the
#      store does (by thread and stack) and by stack only;
#   2. symbolization: native addresses/s, cold (empty caches: every
#      address through libdw) and warm (the same stacks again: the stack
#      cache), against libtorch_cpu.so and strata-server (uploaded to the
#      build-id store), from the server's own symbolize histogram;
#   3. wire size: a real agent (--server, --period 10) on a CPU PyTorch
#      training loop: bytes per 10 s batch and compression ratio.
# Prints one "result:" line per measurement.
# Usage: bench/ingest.sh [COUNT] [--ingest-only]  (--ingest-only: part 1 only)
# Environment: QUERY_NODES (0: no part 1b), QUERY_BATCHES (default 360).
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${1:-60}
ONLY=${2:-}
T=$(mktemp -d /tmp/strata-ingest.XXXXXX)
QUERY_NODES=${QUERY_NODES:-100}
QUERY_BATCHES=${QUERY_BATCHES:-360}
SRV_PID= AGENT_PID= LOAD_PID=
CH_PIDS=()
cleanup() {
	for p in $AGENT_PID $LOAD_PID $SRV_PID "${CH_PIDS[@]}"; do kill "$p" 2> /dev/null || true; done
	wait 2> /dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT

port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
start() { # start NAME [STORE [ARGS...]]: a fresh server with its own store (default SQLite)
	PORT=$(port)
	build/strata-server --listen "127.0.0.1:$PORT" --store "${2:-sqlite:$T/$1.db}" --no-debuginfod \
		"${@:3}" > "$T/$1.log" 2>&1 &
	SRV_PID=$!
	for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" > /dev/null && return; sleep 0.1; done
	echo "server did not start" >&2
	exit 1
}
stop() { kill "$SRV_PID"; wait "$SRV_PID" 2> /dev/null || true; SRV_PID=; }
metric() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

cpu_s() { # PID: its user+system CPU seconds so far
	awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$1/stat"
}
ch_cpu_s() { # all ClickHouse servers' CPU seconds so far
	local p sum=0
	for p in "${CH_PIDS[@]}"; do sum=$(python3 -c "print($sum + $(cpu_s "$p"))"); done
	echo "$sum"
}
ingest() { # NAME STORE [SERVER ARGS...]: part 1 against one store
	echo "== 1. ingest ($1): $COUNT synthetic node-batches"
	start "ingest-$1" "$2" "${@:3}"
	build/fixtures/gen_batch post "http://127.0.0.1:$PORT" --count 5 > /dev/null # warm-up
	local c0 ch0 out c1 ch1 store_s store_n sym_s size
	c0=$(cpu_s "$SRV_PID")
	ch0=$(ch_cpu_s)
	out=$(build/fixtures/gen_batch post "http://127.0.0.1:$PORT" --count "$COUNT" --threads 2 --seed 2 \
		--nodes 8)
	c1=$(cpu_s "$SRV_PID")
	ch1=$(ch_cpu_s)
	echo "$out"
	store_s=$(metric strata_store_ingest_seconds_sum)
	store_n=$(metric strata_store_ingest_seconds_count)
	sym_s=$(metric strata_symbolize_seconds_sum)
	size=$(metric strata_store_bytes)
	local bps sps
	bps=$(sed -n 's/.*batches_per_s=\([0-9.]*\).*/\1/p' <<< "$out")
	sps=$(sed -n 's/.*samples_per_s=\([0-9]*\).*/\1/p' <<< "$out")
	echo "result: ingest store=$1 batches_per_s=$bps samples_per_s=$sps" \
		"server_cpu_s=$(python3 -c "print(round($c1 - $c0, 2))")" \
		"batches_per_server_core_s=$(python3 -c "print(round($COUNT / max($c1 - $c0, 1e-9), 1))")" \
		"samples_per_server_core_s=$(python3 -c "print(int($COUNT * $sps / $bps / max($c1 - $c0, 1e-9)))")" \
		"clickhouse_cpu_s=$(python3 -c "print(round($ch1 - $ch0, 2))")" \
		"batches_per_clickhouse_core_s=$(python3 -c "print(round($COUNT / ($ch1 - $ch0), 1) if $ch1 > $ch0 else '-')")" \
		"store_ms_per_batch=$(python3 -c "print(round(1000 * $store_s / $store_n, 1))")" \
		"symbolize_ms_per_batch=$(python3 -c "print(round(1000 * $sym_s / $store_n, 1))")" \
		"store_bytes_per_batch=$(python3 -c "print(int(${size:-0} / $store_n))")"
	stop
}

chq() { # SQL: one statement on the first ClickHouse server (Distributed inserts synchronous)
	curl -sS --fail-with-body --max-time 1200 "$CH_URL/?insert_distributed_sync=1" --data-binary "$1"
}
copy_nodes() { # DB LO HI: qnode's rows and commit records copied as nodes qnode-LO .. qnode-(HI-1)
	local arr="arrayMap(x -> x + $2, range($(($3 - $2))))"
	chq "INSERT INTO $1.cpu_samples (day, ingest, b_start, b_end, node, pid, pstart, job,
		container, has_rank, rank, tid, comm, stack_id, count) SELECT day, ingest + n, b_start,
		b_end, concat(node, '-', toString(n)), pid, pstart, job, container, has_rank, rank, tid,
		comm, stack_id, count FROM $1.cpu_samples ARRAY JOIN $arr AS n WHERE node = 'qnode'"
	chq "INSERT INTO $1.batches (day, ingest, batch_id, node, agent_version, agent_run_id, seq,
		start_ns, end_ns, received_ns, clock_source, clock_error_ns, freq_hz, wire_bytes,
		cpu_samples, drops) SELECT day, ingest + n, concat(batch_id, '-', toString(n)),
		concat(node, '-', toString(n)), agent_version, agent_run_id, seq, start_ns, end_ns,
		received_ns, clock_source, clock_error_ns, freq_hz, wire_bytes, cpu_samples, drops
		FROM $1.batches ARRAY JOIN $arr AS n WHERE node = 'qnode'"
}
api_profile() { # NAME NODES: GET the job's folded profile 4 times: the first's and the median time
	local n times=()
	for _ in 1 2 3 4; do
		n=$(curl -s -o "$T/folded" -w '%{http_code} %{time_total}' \
			"http://127.0.0.1:$PORT/api/v1/profile?format=folded&job=synthetic-job&from=$from&to=$to")
		if [ "${n% *}" != 200 ]; then
			echo "result: query_api store=$1 nodes=$2 failed: HTTP $n: $(head -c 300 "$T/folded")"
			return 0
		fi
		times+=("${n#* }")
	done
	echo "result: query_api store=$1 nodes=$2 batches=$(($2 * QUERY_BATCHES))" \
		"cpu_rows=$(chq "SELECT count() FROM $db.cpu_samples")" \
		"folded_lines=$(wc -l < "$T/folded")" \
		"samples=$(awk '{ s += $NF } END { print s }' "$T/folded")" \
		"first_s=${times[0]} median_s=$(printf '%s\n' "${times[@]:1}" | sort -n | sed -n 2p)"
}
sql_profile() { # NAME NODES GROUP: the store's profile query straight to ClickHouse, by GROUP
	local sql n times=() size
	sql="SELECT $3, sum(count) FROM $db.cpu_samples WHERE b_end > ${from}000000000
		AND b_start < ${to}000000000 AND job = 'synthetic-job' AND ingest IN (SELECT
		min(ingest) FROM $db.batches WHERE end_ns > ${from}000000000 AND start_ns <
		${to}000000000 GROUP BY batch_id) GROUP BY $3 FORMAT TabSeparated"
	for _ in 1 2 3 4; do
		n=$(curl -sS -o /dev/null -w '%{http_code} %{time_total} %{size_download}' \
			"$CH_URL/?distributed_product_mode=local" --data-binary "$sql")
		[ "${n%% *}" = 200 ] || { echo "result: query_sql store=$1 failed: $n"; return 0; }
		n=${n#* }
		times+=("${n% *}")
		size=${n#* }
	done
	echo "result: query_sql store=$1 nodes=$2 group_by=\"$3\" result_bytes=$size" \
		"first_s=${times[0]} median_s=$(printf '%s\n' "${times[@]:1}" | sort -n | sed -n 2p)"
}
query_bench() { # NAME STORE [SERVER ARGS...]: part 1b against one ClickHouse store
	[ "$QUERY_NODES" -gt 0 ] || return 0
	local t0 t1 from to
	db=${2##*/}
	db=${db%%\?*}
	from=$(($(date +%s) - 3600 - 3600))
	to=$((from + 10 * QUERY_BATCHES))
	echo "== 1b. query ($1): one job's flamegraph, $QUERY_NODES nodes x $QUERY_BATCHES batches"
	start "query-$1" "$2" "${@:3}"
	build/fixtures/gen_batch post "http://127.0.0.1:$PORT" --count "$QUERY_BATCHES" --threads 2 \
		--seed 3 --node qnode --start "$from" > /dev/null
	# 10 nodes first: the server's answer (a 100 nodes' one may pass the
	# store's 256 MiB result bound), then all of them
	copy_nodes "$db" 1 10
	api_profile "$1" 10
	t0=$(date +%s.%N)
	copy_nodes "$db" 10 "$QUERY_NODES"
	t1=$(date +%s.%N)
	echo "copied to $QUERY_NODES nodes in $(python3 -c "print(round($t1 - $t0, 1))") s"
	api_profile "$1" "$QUERY_NODES"
	sql_profile "$1" "$QUERY_NODES" "node, pid, tid, comm, has_rank, rank, stack_id"
	sql_profile "$1" "$QUERY_NODES" "stack_id"
	stop
}

ingest sqlite ""
# the same with checkpoint-only syncs (the default syncs every commit:
# docs/server.md): what an acknowledgement that survives a host crash costs
ingest sqlite-sync-normal "sqlite:$T/ingest-sqlite-sync-normal.db?sync=normal"
CH_BIN=${CH_BIN:-/usr/sbin/clickhouse-server}
if [ -x "$CH_BIN" ]; then
	# the helpers of the ClickHouse tests (config, port, start), without their traps
	fail() { echo "$*" >&2; exit 1; }
	skip() { echo "result: ingest store=clickhouse skipped ($*)"; CH_PIDS=(); }
	# shellcheck source=../tests/integration/clickhouse.sh
	source tests/integration/clickhouse.sh
	trap cleanup EXIT
	CH_SHARDS=1 ch_start
	if [ "${#CH_PIDS[@]}" -gt 0 ]; then
		ingest clickhouse "clickhouse://127.0.0.1:$CH_PORT/strata_bench"
		query_bench clickhouse "clickhouse://127.0.0.1:$CH_PORT/strata_q"
		ch_stop
	fi
	CH_SHARDS=2 ch_start
	if [ "${#CH_PIDS[@]}" -gt 0 ]; then
		ingest clickhouse-2shards "clickhouse://$CH_STORE_HOSTS/strata_bench" \
			--clickhouse-cluster "$CH_CLUSTER"
		query_bench clickhouse-2shards "clickhouse://$CH_STORE_HOSTS/strata_q" \
			--clickhouse-cluster "$CH_CLUSTER"
		ch_stop
	fi
else
	echo "result: ingest store=clickhouse skipped (no $CH_BIN)"
fi
[ "$ONLY" = --ingest-only ] && exit 0

# Two kinds of file: libtorch_cpu.so as shipped (120 MB, .dynsym only:
# addresses in local functions stay unresolved, by design) and
# strata-server itself (full DWARF: functions, inlines, lines).
for ELF in $(readlink -f /usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13 2> /dev/null || true) \
	$(readlink -f build/strata-server); do
	[ -f "$ELF" ] || continue
	name=$(basename "$ELF")
	echo "== 2. symbolization against $name"
	start "sym-$name"
	hex=$(python3 - "$ELF" <<'PY'
import subprocess, sys
out = subprocess.run(["readelf", "-n", sys.argv[1]], capture_output=True, text=True).stdout
print([l.split()[-1] for l in out.splitlines() if "Build ID" in l][0])
PY
)
	# The server takes a file only for an id it asked of that node: one
	# small batch first (it answers the id missing), then the upload.
	build/fixtures/gen_batch post "http://127.0.0.1:$PORT" --elf "$ELF" --stacks 1 --depth 2 \
		--count 1 > /dev/null
	curl -sf -H "X-Strata-Node: node-0" --data-binary "@$ELF" \
		"http://127.0.0.1:$PORT/api/v1/symbols/$hex" > /dev/null
	for phase in cold warm; do
		f0=$(metric strata_symbolize_native_frames_total)
		r0=$(metric strata_symbolize_resolved_frames_total)
		s0=$(metric strata_symbolize_seconds_sum)
		build/fixtures/gen_batch post "http://127.0.0.1:$PORT" --elf "$ELF" --stacks 2000 \
			--depth 40 --seed 7 --churn 0 --count 1 > /dev/null
		f1=$(metric strata_symbolize_native_frames_total)
		r1=$(metric strata_symbolize_resolved_frames_total)
		s1=$(metric strata_symbolize_seconds_sum)
		# 2000 stacks x 40 frames; "through libdw" is what missed the caches.
		echo "result: symbolize_${phase} file=$name addresses=80000 through_libdw=$((f1 - f0))" \
			"seconds=$(python3 -c "print(round($s1 - $s0, 4))")" \
			"addresses_per_s=$(python3 -c "print(int(80000 / ($s1 - $s0)))")" \
			"resolved=$(python3 -c "print(round(($r1 - $r0) / ($f1 - $f0), 3) if $f1 > $f0 else 'cached')")"
	done
	stop
done

echo "== 3. wire size of a real training process (agent --server, 10 s periods)"
PY=/usr/bin/python3.11
if [ "$(id -u)" -ne 0 ] || ! $PY -c 'import torch' 2> /dev/null; then
	echo "result: wire skipped (needs root and python3-torch)"
	exit 0
fi
start wire
$PY - > /dev/null 2>&1 <<'PY' &
import time, torch
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(256, 512), torch.randint(0, 10, (256,))
t = time.time() + 45
while time.time() < t:
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
PY
LOAD_PID=$!
sleep 2
build/strata-agent --server "http://127.0.0.1:$PORT" --period 10 -p "$LOAD_PID" \
	--spool "$T/spool" > /dev/null 2>&1 &
AGENT_PID=$!
sleep 41
kill -INT "$AGENT_PID"
wait "$AGENT_PID" || true
AGENT_PID=
curl -s "http://127.0.0.1:$PORT/api/v1/nodes" > "$T/nodes.json"
python3 - "$T/nodes.json" "$(metric strata_ingest_wire_bytes_total)" "$(metric strata_ingest_raw_bytes_total)" \
	"$(metric strata_batches_stored_total)" "$(metric strata_symbolize_hit_rate)" <<'PY'
import json, sys
nodes = json.load(open(sys.argv[1]))["nodes"]
wire, raw, n = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
samples = sum(x["cpu_samples"] for x in nodes)
# The last batch covers a partial period: judge full ones by the average.
print(f"result: wire batches={n} samples={samples} wire_bytes_per_batch={int(wire / n)} "
      f"raw_bytes_per_batch={int(raw / n)} compression={raw / wire:.2f} "
      f"symbolize_hit_rate={sys.argv[5]}")
PY
