# A hostile client at strata-server (issue 15): a request is judged on its
# headers (credential, route, declared size) before its body is read, so
# three token-less 200 MB POSTs neither raise the server's peak RSS
# (VmHWM) nor get read; batch bodies in memory share one budget (503 past
# it); a 200 MB symbol upload is streamed to disk, not held in memory.
# Symbol files are taken only for ids asked of the node that sends them.
# Needs no BPF.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/server_lib.sh"

PORT=$(free_port)
echo "hostile-token" > "$T/token"
AUTH="Authorization: Bearer hostile-token"
start_server "$PORT" --token-file "$T/token" --max-batch-mb 1 --max-buffered-mb 8
BASE="http://127.0.0.1:$PORT"
truncate -s 200M "$T/big"
hwm() { awk '/^VmHWM/ { print $2 }' "/proc/$SRV_PID/status"; }
echo "peak RSS at start: $(hwm) kB"

# send FILE PATH [curl args]: POSTs FILE to PATH; prints "STATUS SECONDS
# BYTES_SENT ERROR".  What the client got to send is what the server read
# (and its socket buffers held): recv() on a socket is not in /proc/PID/io.
send() {
	local f=$1 path=$2
	shift 2
	curl -s -o /dev/null -w '%{http_code} %{time_total}s %{size_upload} %{errormsg}' -X POST \
		-T "$f" "$@" --max-time 60 "$BASE$path" || true
}
# expect NAME STATUS FILE PATH [curl args]
expect() {
	local name=$1 want=$2 got
	shift 2
	got=$(send "$@")
	echo "$name: $got"
	[ "${got%% *}" = "$want" ] || fail "$name: HTTP ${got%% *}, want $want"
}

# 1. The attacker does not wait for "100 Continue": the answer (401) comes
# before the body is read; the connection is then closed, so a client
# still sending may see a reset instead of the answer.  Either is fine:
# what matters is that the server neither reads nor keeps the bodies.
send "$T/big" /api/v1/batches -H 'Expect:' > "$T/c1" &
p1=$!
send "$T/big" /api/v1/symbols/0123456789abcdef0123456789abcdef01234567 -H 'Expect:' > "$T/c2" &
p2=$!
send "$T/big" /api/v1/nosuch -H 'Expect:' -H "Authorization: Bearer wrong" > "$T/c3" &
p3=$!
wait $p1 $p2 $p3 # not the server
read_mb=$(( ($(cut -d' ' -f3 "$T/c1") + $(cut -d' ' -f3 "$T/c2") + $(cut -d' ' -f3 "$T/c3")) >> 20 ))
peak=$(hwm)
echo "answers: $(cat "$T/c1") | $(cat "$T/c2") | $(cat "$T/c3")"
echo "peak RSS after three token-less 200 MB POSTs: $peak kB; sent before the answer: $read_mb MiB"
for i in 1 2 3; do
	case $(cut -d' ' -f1 "$T/c$i") in 401 | 000) ;; *) fail "POST $i: $(cat "$T/c$i")" ;; esac
done
[ "$read_mb" -lt 32 ] || fail "the server read $read_mb MiB of refused bodies"
[ "$peak" -lt 65536 ] || fail "peak RSS $peak kB: token-less bodies were buffered"
grep -q '^strata_batches_rejected_total{reason="unauthorized"} 3$' <(api /metrics) ||
	fail "three unauthorized requests not counted"

# 2. Clients that wait for "100 Continue" get the answer and send nothing;
# small refused bodies are read and dropped, so the answer always arrives.
expect "no token, 200 MB" 401 "$T/big" /api/v1/batches -H 'Expect: 100-continue'
expect "over the batch bound" 413 "$T/big" /api/v1/batches -H 'Expect: 100-continue' -H "$AUTH"
expect "no such path" 404 "$T/big" /api/v1/nosuch -H 'Expect: 100-continue' -H "$AUTH"
head -c 100000 /dev/urandom > "$T/small"
expect "no token, 100 KB" 401 "$T/small" /api/v1/batches -H 'Expect:'
expect "query path with a body" 413 "$T/small" /api/v1/jobs -H 'Expect:' -H "$AUTH" -X GET
expect "bad build-id" 400 "$T/small" /api/v1/symbols/XYZ -H 'Expect:' -H "$AUTH"
peak=$(hwm)
[ "$peak" -lt 65536 ] || fail "peak RSS $peak kB after refused uploads"

# 3. One budget for bodies in memory (8 MiB here): ten slow 900 KB
# uploads at once cannot all be held; those past the budget get 503 (the
# agent retries), and the budget is whole again afterwards.
head -c 921600 /dev/urandom > "$T/slow"
pids=()
for i in $(seq 10); do
	send "$T/slow" /api/v1/batches -H 'Expect:' -H "$AUTH" --limit-rate 300K > "$T/s$i" &
	pids+=($!)
done
wait "${pids[@]}"
for i in $(seq 10); do echo "slow upload $i: $(cat "$T/s$i")"; done
cut -d' ' -f1 "$T"/s[0-9]* | grep -qx 503 || fail "no upload refused past the budget"
api /metrics > "$T/metrics"
grep -Eq '^strata_batches_rejected_total\{reason="busy"\} [1-9]' "$T/metrics" ||
	fail "busy refusals not counted"
grep -q '^strata_request_memory_bytes 0$' "$T/metrics" || fail "budget not given back: $(grep memory_bytes "$T/metrics")"
"$GEN" write "$T/good.zst" --stacks 20 --samples 100 --node hostile-node > /dev/null
expect "good batch" 200 "$T/good.zst" /api/v1/batches -H 'Expect:' -H "$AUTH"
# Twelve idle connections that declare 900 KB bodies and send none (10.8
# MB declared, over the budget) hold only what arrived: a batch still fits.
python3 - "$PORT" hostile-token > "$T/idle.out" <<'PY' &
import socket, sys, time
port, token = int(sys.argv[1]), sys.argv[2]
socks = []
for _ in range(12):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /api/v1/batches HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
              token.encode() + b"\r\nContent-Length: 921600\r\n\r\n")
    socks.append(s)
print("held", flush=True)
time.sleep(8)
PY
idle=$!
for _ in $(seq 50); do grep -q held "$T/idle.out" 2> /dev/null && break; sleep 0.1; done
sleep 0.5
expect "batch beside idle declared bodies" 200 "$T/good.zst" /api/v1/batches -H 'Expect:' -H "$AUTH"
kill "$idle" 2> /dev/null; wait "$idle" 2> /dev/null || true
# Slowloris from one address (127.0.0.2): 1100 connections that send half
# a request line and wait.  It holds at most --max-conns-per-ip (256) of
# the 1024; everyone else is still served.
python3 - "$PORT" > "$T/loris.out" <<'PY' &
import socket, sys, time
port, socks, refused = int(sys.argv[1]), [], 0
for _ in range(1100):
    s = socket.socket()
    s.bind(("127.0.0.2", 0))
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET / HTTP/1.1\r\n")
        socks.append(s)
    except OSError:
        refused += 1
print("held", flush=True)
time.sleep(10)
PY
loris=$!
for _ in $(seq 100); do grep -q held "$T/loris.out" 2> /dev/null && break; sleep 0.1; done
sleep 0.5
got=$(send "$T/good.zst" /api/v1/batches -H 'Expect:' -H "$AUTH")
echo "a batch beside a slowloris: $got"
secs=$(echo "$got" | cut -d' ' -f2)
[ "${got%% *}" = 200 ] && [ "${secs%%.*}" -lt 3 ] ||
	fail "a batch beside a slowloris: $got (the connection table was full)"
kill "$loris" 2> /dev/null; wait "$loris" 2> /dev/null || true

# 4. Symbol files only for ids the server asked of the node that sends
# them; a 200 MB one (a real ELF padded to 200 MB) is streamed to the
# build-id store: stored, and the server's peak RSS stays small.
hex=$(readelf -n "$GEN" | awk '/Build ID/ { print $3 }')
cp "$GEN" "$T/elf"
truncate -s 200M "$T/elf"
ASKED="X-Strata-Node: asked-node"
expect "not asked" 403 "$T/elf" "/api/v1/symbols/$hex" -H 'Expect: 100-continue' -H "$AUTH" -H "$ASKED"
"$GEN" write "$T/elfbatch.zst" --elf "$GEN" --stacks 5 --samples 50 --node asked-node > /dev/null
curl -s -H "$AUTH" --data-binary "@$T/elfbatch.zst" "$BASE/api/v1/batches" | grep -c "\"$hex\"" > /dev/null ||
	fail "the server did not ask for $hex"
expect "asked of another node" 403 "$T/elf" "/api/v1/symbols/$hex" -H 'Expect: 100-continue' \
	-H "$AUTH" -H "X-Strata-Node: other-node"
expect "no node named" 403 "$T/elf" "/api/v1/symbols/$hex" -H 'Expect: 100-continue' -H "$AUTH"
expect "200 MB symbol file" 200 "$T/elf" "/api/v1/symbols/$hex" -H 'Expect:' -H "$AUTH" -H "$ASKED"
cmp -s "$T/elf" "$T/server.db.buildids/${hex:0:2}/${hex:2}" || fail "stored file differs"
peak=$(hwm)
echo "peak RSS after a 200 MB symbol upload: $peak kB"
[ "$peak" -lt 65536 ] || fail "peak RSS $peak kB: the symbol upload was held in memory"
ls -A "$T/server.db.buildids/.incoming" | grep -q . && fail "temporary upload files left"
# 5. A decode bomb: 4 MiB of empty repeated messages (2M stacks) in a few
# hundred bytes of zstd.  Unpacked they would take ~150 MB; max_raw (8 MiB
# here) bounds the whole decode, so it is refused (413) within it.
python3 -c "import sys; sys.stdout.buffer.write(b'\x72\x00' * (2 << 20))" | zstd -19 -qc > "$T/bomb.zst"
echo "decode bomb: $(stat -c %s "$T/bomb.zst") bytes of zstd, 4 MiB decompressed"
expect "decode bomb" 413 "$T/bomb.zst" /api/v1/batches -H 'Expect:' -H "$AUTH"
peak=$(hwm)
echo "peak RSS after the decode bomb: $peak kB"
[ "$peak" -lt 65536 ] || fail "peak RSS $peak kB: the decode bomb was unpacked"
curl -sf "$BASE/healthz" > /dev/null || fail "server stopped serving"
echo "ok: hostile uploads refused unread; one body budget; symbol uploads streamed; decode bombs bounded (peak RSS $peak kB)"
