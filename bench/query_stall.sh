#!/usr/bin/env bash
# How long an agent's batch waits while readers run slow queries, on this
# machine: strata-server (SERVER, default build/strata-server) with its
# defaults and a SQLite store of BATCHES synthetic batches (gen_batch: 8
# ranks x 4 nodes, 1500 distinct stacks 40 frames deep); one pprof
# profile of all of it timed alone; then NQ such queries at once and,
# 0.5 s later, 3 batches POSTed one after the other, each timed.
# Prints one "result:" line per measurement.
# Usage: bench/query_stall.sh [NQ] [BATCHES]   (defaults 6, 300)
set -euo pipefail
cd "$(dirname "$0")/.."
NQ=${1:-6}
BATCHES=${2:-300}
SERVER=${SERVER:-build/strata-server}
GEN=build/fixtures/gen_batch
T=$(mktemp -d /tmp/strata-qstall.XXXXXX)
SRV_PID=
trap '[ -n "$SRV_PID" ] && kill $SRV_PID 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

"$SERVER" --listen "127.0.0.1:$PORT" --store "sqlite:$T/db" --buildid-dir "$T/b" \
	--no-debuginfod > "$T/server.log" 2>&1 &
SRV_PID=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/healthz" > /dev/null && break; sleep 0.1; done
now=$(date +%s)
"$GEN" post "http://127.0.0.1:$PORT" --count "$BATCHES" --stacks 1500 --depth 40 --ranks 8 \
	--threads 2 --nodes 4 --start $((now - 3600)) | sed 's/^/fill: /'
Q="http://127.0.0.1:$PORT/api/v1/profile?format=pprof&from=$((now - 7200))&to=$((now + 60))"
echo "result: one query alone: $(curl -s -o /dev/null -w '%{http_code} %{time_total} s' "$Q")"
pids=()
for i in $(seq "$NQ"); do
	curl -s -o /dev/null -w "result: query $i of $NQ: %{http_code} %{time_total} s\n" "$Q" &
	pids+=($!)
done
sleep 0.5
for k in 1 2 3; do
	"$GEN" post "http://127.0.0.1:$PORT" --count 1 --stacks 1500 --depth 40 --ranks 8 \
		--seed $((k + 10)) --start $((now - 60)) |
		sed -n "s/.*ok=\([0-9]*\).*seconds=\([0-9.]*\).*/result: batch $k during the queries: stored=\1 in \2 s/p"
done
wait "${pids[@]}"
