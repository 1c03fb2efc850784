# Bad input at strata-server: truncated, oversized, zstd-bomb, garbage,
# wrong-version and dangling-reference batches and bad tokens each get a
# clear 4xx, nothing is stored, and the server keeps serving (a good batch
# afterwards is stored, once, even when sent twice).  Needs no BPF.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/server_lib.sh"

PORT=$(free_port)
echo "s3cret-token" > "$T/token"
start_server "$PORT" --token-file "$T/token" --max-batch-mb 1
URL="http://127.0.0.1:$PORT/api/v1/batches"
AUTH="Authorization: Bearer s3cret-token"

# post FILE [curl args...]: prints "STATUS BODY".
post() {
	local f=$1
	shift
	curl -s -o "$T/resp" -w '%{http_code}' -H 'Content-Encoding: zstd' \
		--data-binary "@$f" "$@" "$URL" > "$T/code" || true
	echo "$(cat "$T/code") $(cat "$T/resp")"
}

# expect NAME STATUS REGEX FILE [curl args...]
expect() {
	local name=$1 want=$2 re=$3 f=$4
	shift 4
	local got
	got=$(post "$f" "$@")
	echo "$name: $got"
	[ "${got%% *}" = "$want" ] || fail "$name: HTTP ${got%% *}, want $want"
	grep -Eq "$re" <<< "$got" || fail "$name: answer does not say /$re/"
}

"$GEN" write "$T/good.zst" --stacks 200 --samples 3000 --node bad-input-node > /dev/null
"$GEN" write "$T/v2.zst" --version 2 --stacks 10 --node bad-input-node > /dev/null
"$GEN" write "$T/badref.zst" --bad-ref --stacks 10 --node bad-input-node > /dev/null
head -c $(( $(stat -c %s "$T/good.zst") / 2 )) "$T/good.zst" > "$T/truncated.zst"
head -c 2000000 /dev/urandom > "$T/big.bin"
head -c 4096 /dev/urandom > "$T/garbage.bin"
zstd -qc "$T/garbage.bin" > "$T/garbage-in-zstd.zst"
head -c 200000000 /dev/zero | zstd -qc -19 > "$T/bomb.zst"

expect "no token" 401 "bearer token" "$T/good.zst"
expect "wrong token" 401 "bearer token" "$T/good.zst" -H "Authorization: Bearer s3cret-tokeX"
expect "truncated" 400 "truncated|corrupt" "$T/truncated.zst" -H "$AUTH"
expect "oversized" 413 "over 1048576 bytes" "$T/big.bin" -H "$AUTH"
expect "zstd bomb" 413 "decompresses to more than" "$T/bomb.zst" -H "$AUTH"
expect "garbage" 400 "not a zstd frame" "$T/garbage.bin" -H "$AUTH"
expect "garbage in zstd" 400 "not a strata batch|protobuf" "$T/garbage-in-zstd.zst" -H "$AUTH"
expect "wrong version" 400 "unsupported wire version 2" "$T/v2.zst" -H "$AUTH"
expect "dangling reference" 422 "stack [0-9]+ out of range" "$T/badref.zst" -H "$AUTH"
curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/api/v1/nodes" > "$T/code" || true
[ "$(cat "$T/code")" = 401 ] || fail "queries without the token answered $(cat "$T/code")"

# Nothing stored, still serving.
curl -sf "http://127.0.0.1:$PORT/healthz" > /dev/null || fail "server stopped serving"
curl -sf -H "$AUTH" "http://127.0.0.1:$PORT/api/v1/nodes" > "$T/nodes.json"
[ "$(json_sum nodes batches < "$T/nodes.json")" -eq 0 ] || fail "bad input was stored: $(cat "$T/nodes.json")"
sqlite3 "$T/server.db" "SELECT COUNT(*) FROM stacks" > "$T/n"
[ "$(cat "$T/n")" -eq 0 ] || fail "stacks stored from bad batches"

expect "good" 200 '"status":"stored"' "$T/good.zst" -H "$AUTH"
expect "good again" 200 '"status":"duplicate"' "$T/good.zst" -H "$AUTH"
curl -sf -H "$AUTH" "http://127.0.0.1:$PORT/api/v1/nodes" > "$T/nodes.json"
[ "$(json_sum nodes batches < "$T/nodes.json")" -eq 1 ] || fail "want one batch: $(cat "$T/nodes.json")"
[ "$(json_sum nodes cpu_samples < "$T/nodes.json")" -eq 3000 ] || fail "want 3000 samples"
api "/metrics" > "$T/metrics"
for r in too_large not_zstd bad_protobuf bad_version invalid unauthorized; do
	grep -Eq "^strata_batches_rejected_total\{reason=\"$r\"\} [1-9]" "$T/metrics" ||
		fail "metric for $r not counted"
done
grep -q '^strata_batches_duplicate_total 1$' "$T/metrics" || fail "duplicate not counted"
echo "ok: every bad batch refused with a clear error; nothing stored; server kept serving"
