# A slow debuginfod and a batch of thousands of build-ids it does not have
# (issue 15): the server asks in the background, outside its locks, at
# most 32 new build-ids per batch or query, and remembers "not found" for
# its TTL.
# Ingest, /healthz and queries answer at once while the asks are pending;
# the same build-ids in a later batch are not asked again.  No BPF.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/server_lib.sh"
ldconfig -p | grep libdebuginfod.so.1 > /dev/null || skip "no libdebuginfod.so.1"

DELAY=${DBGD_DELAY:-0.3}
DPORT=$(free_port)
python3 "$(dirname "$0")/debuginfod_standin.py" "$DPORT" "$DELAY" "$T/requests" \
	> "$T/dbgd.log" 2>&1 &
DBGD=$!
trap 'kill $DBGD 2> /dev/null; cleanup_server' EXIT
touch "$T/requests"
sleep 0.5

PORT=$(free_port)
DBGD_URL="http://127.0.0.1:$DPORT" start_server "$PORT"
BASE="http://127.0.0.1:$PORT"
metric() { api /metrics | awk -v m="$1" '$1 == m { print $2 }'; }
# timed NAME MAX_S CURL_ARGS...: the request must answer 200 within MAX_S.
timed() {
	local name=$1 max=$2 out
	shift 2
	out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' "$@")
	echo "$name: HTTP ${out% *} in ${out#* } s"
	[ "${out% *}" = 200 ] || fail "$name: HTTP ${out% *}"
	python3 -c "import sys; sys.exit(not float(sys.argv[1]) < float(sys.argv[2]))" "${out#* }" "$max" ||
		fail "$name took ${out#* } s (want < $max s)"
}

# 3000 libraries debuginfod has never heard of, ~2600 of them in frames
"$GEN" write "$T/a.zst" --libs 3000 --stacks 600 --depth 10 --ranks 1 --samples 600 \
	--job slow > /dev/null
timed "ingest, 3000 unknown build-ids" 3 -H 'Content-Encoding: zstd' \
	--data-binary "@$T/a.zst" "$BASE/api/v1/batches"
timed "/healthz while debuginfod is asked" 0.5 "$BASE/healthz"
timed "a query while debuginfod is asked" 3 "$BASE/api/v1/profile?format=folded&job=slow"
pending=$(metric strata_debuginfod_pending)
capped=$(metric strata_debuginfod_capped_total)
echo "pending $pending, left for later batches $capped"
[ "${pending%.*}" -le 64 ] || fail "$pending asks pending: the cap is 32 per batch and per query"
[ "${capped%.*}" -gt 0 ] || fail "nothing capped"

for _ in $(seq 300); do
	[ "$(metric strata_debuginfod_pending)" = 0 ] && break
	sleep 0.2
done
[ "$(metric strata_debuginfod_pending)" = 0 ] || fail "asks still pending"
n1=$(wc -l < "$T/requests")
echo "debuginfod requests for the first batch and query: $n1 (executable + debug file per build-id)"
[ "$n1" -le 128 ] || fail "$n1 requests: more than 32 build-ids asked for one batch or query"

# The same build-ids again: the 32 answered are remembered (not asked
# again); 32 new ones are asked.
"$GEN" write "$T/b.zst" --libs 3000 --stacks 600 --depth 10 --ranks 1 --samples 600 \
	--job slow > /dev/null
timed "ingest again" 3 -H 'Content-Encoding: zstd' --data-binary "@$T/b.zst" \
	"$BASE/api/v1/batches"
for _ in $(seq 300); do
	[ "$(metric strata_debuginfod_pending)" = 0 ] && break
	sleep 0.2
done
n2=$(wc -l < "$T/requests")
dup=$(sort "$T/requests" | uniq -d | wc -l)
echo "requests after the second batch: $n2; asked twice: $dup"
[ "$dup" -eq 0 ] || fail "$dup build-ids asked twice within the TTL"
[ "$(metric strata_debuginfod_negative_hits_total)" -gt 0 ] || fail "no remembered miss used"
echo "ok: debuginfod asked in the background, capped per batch, misses remembered; the server stayed responsive"
