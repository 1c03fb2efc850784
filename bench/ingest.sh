#!/usr/bin/env bash
# strata-server ingest benchmark, on this machine:
#   1. ingest: batches/s and samples/s for synthetic realistic batches (one
#      training node's 10 s: 8 ranks x 4 threads x 49 Hz, 1500 distinct
#      stacks 40 frames deep), POSTed by 2 client threads with keep-alive,
#      into each store: SQLite, then a single-node ClickHouse (a private
#      clickhouse-server on loopback, as tests/integration/clickhouse.sh
#      starts it; skipped if not installed).  Also per server core: batches
#      per second of the strata-server process's CPU time (utime+stime from
#      /proc; ClickHouse's own CPU is reported beside it, not included);
#   2. symbolization: native addresses/s, cold (empty caches: every
#      address through libdw) and warm (the same stacks again: the stack
#      cache), against libtorch_cpu.so and strata-server (uploaded to the
#      build-id store), from the server's own symbolize histogram;
#   3. wire size: a real agent (--server, --period 10) on a CPU PyTorch
#      training loop: bytes per 10 s batch and compression ratio.
# Prints one "result:" line per measurement.
# Usage: bench/ingest.sh [COUNT] [--ingest-only]  (--ingest-only: part 1 only)
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${1:-60}
ONLY=${2:-}
T=$(mktemp -d /tmp/strata-ingest.XXXXXX)
SRV_PID= AGENT_PID= LOAD_PID= CH_PID=
cleanup() {
	for p in $AGENT_PID $LOAD_PID $SRV_PID $CH_PID; do kill "$p" 2> /dev/null || true; done
	wait 2> /dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT

port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
start() { # start NAME [STORE]: a fresh server with its own store (default SQLite)
	PORT=$(port)
	build/strata-server --listen "127.0.0.1:$PORT" --store "${2:-sqlite:$T/$1.db}" --no-debuginfod \
		> "$T/$1.log" 2>&1 &
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
ingest() { # NAME STORE: part 1 against one store
	echo "== 1. ingest ($1): $COUNT synthetic node-batches"
	start "ingest-$1" "$2"
	build/fixtures/gen_batch post "http://127.0.0.1:$PORT" --count 5 > /dev/null # warm-up
	local c0 ch0=0 out c1 ch1=0 store_s store_n sym_s size
	c0=$(cpu_s "$SRV_PID")
	[ -n "$CH_PID" ] && ch0=$(cpu_s "$CH_PID")
	out=$(build/fixtures/gen_batch post "http://127.0.0.1:$PORT" --count "$COUNT" --threads 2 --seed 2)
	c1=$(cpu_s "$SRV_PID")
	[ -n "$CH_PID" ] && ch1=$(cpu_s "$CH_PID")
	echo "$out"
	store_s=$(metric strata_store_ingest_seconds_sum)
	store_n=$(metric strata_store_ingest_seconds_count)
	sym_s=$(metric strata_symbolize_seconds_sum)
	size=$(metric strata_store_bytes)
	echo "result: ingest store=$1 $(sed -n 's/.*\(batches_per_s=[0-9.]*\).*\(samples_per_s=[0-9]*\).*/\1 \2/p' <<< "$out")" \
		"server_cpu_s=$(python3 -c "print(round($c1 - $c0, 2))")" \
		"batches_per_server_core_s=$(python3 -c "print(round($COUNT / max($c1 - $c0, 1e-9), 1))")" \
		"clickhouse_cpu_s=$(python3 -c "print(round($ch1 - $ch0, 2))")" \
		"store_ms_per_batch=$(python3 -c "print(round(1000 * $store_s / $store_n, 1))")" \
		"symbolize_ms_per_batch=$(python3 -c "print(round(1000 * $sym_s / $store_n, 1))")" \
		"store_bytes_per_batch=$(python3 -c "print(int(${size:-0} / $store_n))")"
	stop
}
ingest sqlite ""
CH_BIN=${CH_BIN:-/usr/sbin/clickhouse-server}
if [ -x "$CH_BIN" ]; then
	# the helpers of the ClickHouse tests (config, port, start), without their traps
	fail() { echo "$*" >&2; exit 1; }
	skip() { echo "result: ingest store=clickhouse skipped ($*)"; CH_PID=; }
	# shellcheck source=../tests/integration/clickhouse.sh
	source tests/integration/clickhouse.sh
	trap cleanup EXIT
	ch_start
	if [ -n "$CH_PID" ]; then
		ingest clickhouse "clickhouse://127.0.0.1:$CH_PORT/strata_bench"
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
