# strata-server asks debuginfod (DEBUGINFOD_URLS) for binaries no agent
# uploaded: a stand-in debuginfod (Python, the HTTP protocol's
# /buildid/HEX/executable) serves build/fixtures/chain.  The ask runs in
# the background: the first batch with frames in it is stored at once and
# its frames are named at query time once the file is here; a later batch
# is symbolized at ingest; the server never asks the agent for that
# build-id.  No BPF.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/server_lib.sh"
ldconfig -p | grep libdebuginfod.so.1 > /dev/null || skip "no libdebuginfod.so.1"

ELF=$FIX/chain
HEX=$(readelf -n "$ELF" | awk '/Build ID/ { print $3 }')
[ -n "$HEX" ] || fail "fixture has no build-id"
DPORT=$(free_port)
python3 "$(dirname "$0")/debuginfod_standin.py" "$DPORT" 0 "$T/requests" "$HEX=$ELF" \
	> "$T/dbgd.log" 2>&1 &
DBGD=$!
trap 'kill $DBGD 2> /dev/null; cleanup_server' EXIT
sleep 0.5

PORT=$(free_port)
DBGD_URL="http://127.0.0.1:$DPORT" start_server "$PORT"

"$GEN" write "$T/b.zst" --elf "$ELF" --stacks 30 --depth 6 --ranks 1 --samples 300 --job dbgd > /dev/null
curl -s -H 'Content-Encoding: zstd' --data-binary "@$T/b.zst" \
	"http://127.0.0.1:$PORT/api/v1/batches" > "$T/answer.json"
cat "$T/answer.json"
grep -q '"status":"stored"' "$T/answer.json" || fail "batch not stored"
if grep -q "$HEX" "$T/answer.json"; then fail "the server asked the agent for a file debuginfod has"; fi
for _ in $(seq 100); do
	api /metrics | grep -Eq '^strata_debuginfod_found_total [1-9]' && break
	sleep 0.1
done
grep -q "/buildid/$HEX/executable" "$T/requests" || fail "debuginfod was not asked"
api /metrics | grep -E '^strata_debuginfod_found_total [1-9]' || fail "no debuginfod hit counted"

# the first batch, stored before the file came: named at query time
api "/api/v1/profile?format=folded&job=dbgd" > "$T/p.folded"
# a later batch: named at ingest
"$GEN" write "$T/b2.zst" --elf "$ELF" --stacks 30 --depth 6 --ranks 1 --samples 300 --job dbgd \
	--start $(( $(date +%s) - 5 )) > /dev/null
curl -s -H 'Content-Encoding: zstd' --data-binary "@$T/b2.zst" \
	"http://127.0.0.1:$PORT/api/v1/batches" > "$T/answer2.json"
if grep -q "$HEX" "$T/answer2.json"; then fail "the server asked the agent for a file debuginfod has"; fi
api "/metrics" > "$T/metrics"
grep -E '^strata_symbolize_resolved_frames_total [1-9]' "$T/metrics" || fail "nothing resolved at ingest"
# Frames land at random offsets of chain's .text: its functions show up.
grep -Eq '(^|;)(main|a|b|c|now|_start)(;| )' "$T/p.folded" || fail "no chain function named: $(head -3 "$T/p.folded")"
echo "ok: symbolized from debuginfod without an upload"
