# strata-agent --server https://...: TLS verified against --ca-file, bearer
# token sent, batches zstd-encoded.  The server here is a small Python
# HTTPS stand-in (strata-server itself runs plain HTTP behind a TLS
# terminator), with a self-signed certificate made by the test.  Without
# the CA the agent must refuse the server (and keep its batches).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/server_lib.sh"
require_bpf
command -v openssl > /dev/null || skip "no openssl"

openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=127.0.0.1" \
	-addext "subjectAltName=IP:127.0.0.1" -keyout "$T/key.pem" -out "$T/cert.pem" 2> /dev/null
echo "tls-token" > "$T/token"
PORT=$(free_port)
python3 - "$PORT" "$T" > "$T/stub.log" 2>&1 <<'PY' &
import http.server, json, ssl, sys
port, d = int(sys.argv[1]), sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        ok = (self.path == "/api/v1/batches" and body[:4] == b"\x28\xb5\x2f\xfd"
              and self.headers.get("Authorization") == "Bearer tls-token"
              and self.headers.get("Content-Encoding") == "zstd")
        with open(f"{d}/received", "a") as f:
            f.write(f"{self.path} {len(body)} {ok}\n")
        self.send_response(200 if ok else 400)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"status":"stored","missing_build_ids":[]}')
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(f"{d}/cert.pem", f"{d}/key.pem")
s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
PY
STUB=$!
trap 'kill $STUB 2> /dev/null; cleanup_server' EXIT
sleep 1

# Without the CA: certificate verification fails, nothing is delivered.
"$AGENT" --server "https://127.0.0.1:$PORT" --period 1 -F 49 -p $$ --spool "$T/spool1" \
	--token-file "$T/token" -v 2> "$T/agent1.log" &
A=$!
sleep 4
kill -INT "$A"
wait "$A" || true
[ ! -s "$T/received" ] || fail "a batch was accepted over unverified TLS"
grep -qE 'upload: sent=0 .*failures=[1-9]' "$T/agent1.log" || fail "no failed attempts: $(tail -3 "$T/agent1.log")"
ls "$T/spool1"/*.batch > /dev/null || fail "undelivered batches were not kept"

# With the CA: delivered, with the token, zstd.
"$AGENT" --server "https://127.0.0.1:$PORT" --period 1 -F 49 -p $$ --spool "$T/spool2" \
	--token-file "$T/token" --ca-file "$T/cert.pem" -v 2> "$T/agent2.log" &
A=$!
sleep 4
kill -INT "$A"
wait "$A" || fail "agent failed: $(tail -3 "$T/agent2.log")"
cat "$T/received"
grep -q ' True$' "$T/received" || fail "no batch delivered over TLS"
if grep -q ' False$' "$T/received"; then fail "a request lacked the token or zstd"; fi
[ "$(spooled_batches "$T/spool2")" = 0 ] || fail "batches left in the spool after delivery"
echo "ok: TLS verified against --ca-file; refused without it; token and zstd sent"
