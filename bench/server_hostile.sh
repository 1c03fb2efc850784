#!/usr/bin/env bash
# strata-server under hostile input (issue 15), for any server binary (to
# compare builds): one "result:" line per measurement.
#   1. three token-less 200 MB POSTs at once (no Expect: 100-continue):
#      peak RSS (VmHWM) before and after, bytes the clients got to send
#      (what the server read, plus socket buffers);
#   2. decode bombs, with the token: empty repeated messages (Batch.stacks)
#      of 2, 8 and 64 MiB in a few hundred bytes to 6 KB of zstd: answer,
#      seconds, peak RSS of a fresh server each;
#   3. a debuginfod that answers 404 after 0.3 s per request and a batch of
#      100 build-ids it lacks: how long that batch and an unrelated one
#      POSTed a second later take.
# Usage: bench/server_hostile.sh [SERVER]  (default build/strata-server)
set -euo pipefail
cd "$(dirname "$0")/.."
SERVER=$(readlink -f "${1:-build/strata-server}")
GEN=build/fixtures/gen_batch
T=$(mktemp -d /tmp/strata-hostile.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null || true; done
	wait 2> /dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
hwm() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status"; }
echo tok > "$T/token"
start() { # start NAME [env...]: a fresh server; sets PORT, SPID
	local name=$1
	shift
	PORT=$(port)
	env "$@" "$SERVER" --listen "127.0.0.1:$PORT" --store "sqlite:$T/$name.db" \
		--token-file "$T/token" > "$T/$name.log" 2>&1 &
	SPID=$!
	PIDS+=("$SPID")
	for _ in $(seq 100); do
		curl -sf "http://127.0.0.1:$PORT/healthz" > /dev/null && return
		sleep 0.1
	done
	echo "server $name did not start" >&2
	exit 1
}

# 1. token-less uploads
truncate -s 200M "$T/big"
start uploads --
h0=$(hwm "$SPID")
cpids=()
for p in /api/v1/batches /api/v1/symbols/0123456789abcdef0123456789abcdef01234567 /api/v1/nosuch; do
	curl -s -o /dev/null -w '%{size_upload}\n' -X POST -H 'Expect:' -T "$T/big" \
		--max-time 120 "http://127.0.0.1:$PORT$p" >> "$T/sent" &
	cpids+=($!)
done
wait "${cpids[@]}" || true
sleep 0.5
echo "result: tokenless_uploads count=3 bytes_each=209715200 vmhwm_before_kb=$h0" \
	"vmhwm_after_kb=$(hwm "$SPID") sent_mb=$(( $(awk '{ s += $1 } END { print s + 0 }' "$T/sent") >> 20 ))"

# 2. decode bombs
for mib in 2 8 64; do
	python3 -c "import sys; sys.stdout.buffer.write(b'\x72\x00' * ($mib << 19))" |
		zstd -19 -qc > "$T/bomb$mib.zst"
	start "bomb$mib" --
	h0=$(hwm "$SPID")
	out=$(curl -s -o "$T/resp" -w '%{http_code} %{time_total}' -H 'Authorization: Bearer tok' \
		-H 'Expect:' --data-binary "@$T/bomb$mib.zst" "http://127.0.0.1:$PORT/api/v1/batches")
	echo "result: decode_bomb raw_mib=$mib zstd_bytes=$(stat -c %s "$T/bomb$mib.zst")" \
		"http=${out% *} seconds=${out#* } vmhwm_before_kb=$h0 vmhwm_after_kb=$(hwm "$SPID")"
	kill "$SPID"
done

# 3. a slow debuginfod
DPORT=$(port)
python3 tests/integration/debuginfod_standin.py "$DPORT" 0.3 "$T/requests" > /dev/null 2>&1 &
PIDS+=($!)
sleep 0.5
start dbgd DEBUGINFOD_URLS="http://127.0.0.1:$DPORT" DEBUGINFOD_CACHE_PATH="$T/dcache"
"$GEN" write "$T/a.zst" --libs 100 --stacks 600 --depth 10 --ranks 1 --samples 600 --job slow > /dev/null
"$GEN" write "$T/b.zst" --stacks 5 --depth 3 --ranks 1 --samples 60 --job other --seed 9 > /dev/null
post() { curl -s -o /dev/null -w '%{http_code} %{time_total}' -H 'Authorization: Bearer tok' \
	-H 'Content-Encoding: zstd' --data-binary "@$1" "http://127.0.0.1:$PORT/api/v1/batches"; }
post "$T/a.zst" > "$T/a.out" &
sleep 1
b=$(post "$T/b.zst")
wait $!
a=$(cat "$T/a.out")
echo "result: slow_debuginfod unknown_build_ids=100 delay_s=0.3 batch_seconds=${a#* }" \
	"other_batch_seconds=${b#* } requests_so_far=$(wc -l < "$T/requests" 2> /dev/null || echo 0)"
