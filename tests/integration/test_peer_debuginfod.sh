# strata-server against a real debuginfod (elfutils, Debian package
# debuginfod) on loopback, no stand-in: build/fixtures/chain is split into
# a stripped executable (no .symtab: its functions cannot be named from
# it) and its separate debug file; debuginfod scans that directory (-F)
# and serves both by build-id.  A batch with frames in the stripped
# binary, whose file the agent never uploads, must come out with chain's
# function names: the server fetched the debug info by build-id.  No BPF.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/server_lib.sh"
command -v debuginfod > /dev/null || skip "debuginfod not installed (Debian package debuginfod)"
ldconfig -p | grep libdebuginfod.so.1 > /dev/null || skip "no libdebuginfod.so.1 (Debian package libdebuginfod1)"

HEX=$(readelf -n "$FIX/chain" | awk '/Build ID/ { print $3 }')
[ -n "$HEX" ] || fail "fixture has no build-id"
mkdir -p "$T/srv"
objcopy --only-keep-debug "$FIX/chain" "$T/srv/chain.debug"
strip --strip-all -o "$T/srv/chain" "$FIX/chain"
objcopy --add-gnu-debuglink="$T/srv/chain.debug" "$T/srv/chain"
readelf -S "$T/srv/chain" | grep -q '\.symtab' && fail "executable not stripped"
readelf -n "$T/srv/chain" | grep -q "$HEX" || fail "stripping changed the build-id"

DPORT=$(free_port)
# DEBUGINFOD_URLS unset: this one serves, it does not federate
env -u DEBUGINFOD_URLS debuginfod -F -p "$DPORT" -d "$T/dbgd.sqlite" -t 0 -g 0 -c 1 \
	--disable-source-scan "$T/srv" > "$T/dbgd.log" 2>&1 &
DBGD=$!
trap 'kill $DBGD 2> /dev/null; wait $DBGD 2> /dev/null || true; cleanup_server' EXIT
# ready once the scan has indexed both files
for _ in $(seq 200); do
	curl -sf -o /dev/null "http://127.0.0.1:$DPORT/buildid/$HEX/debuginfo" &&
		curl -sf -o /dev/null "http://127.0.0.1:$DPORT/buildid/$HEX/executable" && break
	kill -0 $DBGD 2> /dev/null || { cat "$T/dbgd.log"; fail "debuginfod exited"; }
	sleep 0.1
done
curl -sf -o "$T/got.debug" "http://127.0.0.1:$DPORT/buildid/$HEX/debuginfo" || { tail "$T/dbgd.log"; fail "debuginfod does not serve the debug info"; }
cmp -s "$T/got.debug" "$T/srv/chain.debug" || fail "debuginfod served another file as debuginfo"

PORT=$(free_port)
DBGD_URL="http://127.0.0.1:$DPORT" start_server "$PORT"
"$GEN" write "$T/b.zst" --elf "$T/srv/chain" --stacks 30 --depth 6 --ranks 1 --samples 300 --job dbgd > /dev/null
curl -s -H 'Content-Encoding: zstd' --data-binary "@$T/b.zst" \
	"http://127.0.0.1:$PORT/api/v1/batches" > "$T/answer.json"
grep -q '"status":"stored"' "$T/answer.json" || fail "batch not stored: $(cat "$T/answer.json")"
if grep -q "$HEX" "$T/answer.json"; then fail "the server asked the agent for a file debuginfod has"; fi
for _ in $(seq 100); do
	api /metrics | grep -Eq '^strata_debuginfod_found_total [1-9]' && break
	sleep 0.1
done
api /metrics | grep -E '^strata_debuginfod_found_total [1-9]' || { tail "$T/server.log"; fail "no debuginfod hit counted"; }
# the batch was stored before the file came: its frames are named at query time
api "/api/v1/profile?format=folded&job=dbgd" > "$T/p.folded"
grep -Eq '(^|;)(main|a|b|c|now|_start)(;| )' "$T/p.folded" ||
	fail "no chain function named from the debug info: $(head -3 "$T/p.folded")"
# (the stripped executable's .dynsym has none of these names: they came
# from the debug file)
echo "ok: symbolized a stripped binary from a real debuginfod by build-id ($(wc -l < "$T/p.folded") stacks)"
