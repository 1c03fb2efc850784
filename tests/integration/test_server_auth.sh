# Credentials at strata-server (issue 15): separate ingest, read and metrics
# tokens (a file of tokens each: one can be rotated in before the old one
# goes), none taken from a URL, none written into a page; browsers sign in
# with a read token for an HttpOnly cookie that grants reading only; and
# the server speaks TLS itself.  Needs no BPF.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/server_lib.sh"

tok() { head -c 18 /dev/urandom | base64 | tr '+/' '-_'; }
INGEST=$(tok) READ_OLD=$(tok) READ=$(tok) METRICS=$(tok)
echo "$INGEST" > "$T/ingest"
printf '%s\n%s\n' "$READ_OLD" "$READ" > "$T/read"
echo "$METRICS" > "$T/metrics"
PORT=$(free_port)
start_server "$PORT" --ingest-token-file "$T/ingest" --read-token-file "$T/read" \
	--metrics-token-file "$T/metrics"
BASE="http://127.0.0.1:$PORT"

# code NAME WANT CURL_ARGS...: the answer's status must be WANT.
code() {
	local name=$1 want=$2 got
	shift 2
	got=$(curl -s -o "$T/body" -D "$T/headers" -w '%{http_code}' "$@" || true)
	echo "$name: $got"
	[ "$got" = "$want" ] || fail "$name: HTTP $got, want $want ($(head -c 200 "$T/body"))"
}
bearer() { echo "Authorization: Bearer $1"; }
"$GEN" write "$T/b.zst" --stacks 10 --samples 100 --node auth-node --job auth-job > /dev/null
post() { curl -s -o "$T/body" -w '%{http_code}' -H 'Content-Encoding: zstd' \
	--data-binary "@$T/b.zst" "$@" "$BASE/api/v1/batches"; }

# ingest: the ingest token only
[ "$(post -H "$(bearer "$READ")")" = 401 ] || fail "a read token ingested"
[ "$(post -H "$(bearer "$METRICS")")" = 401 ] || fail "a metrics token ingested"
[ "$(post -H "$(bearer "$INGEST")")" = 200 ] || fail "the ingest token did not ingest"
code "symbol upload with a read token" 401 -H "$(bearer "$READ")" -H 'X-Strata-Node: auth-node' \
	--data-binary @/dev/null "$BASE/api/v1/symbols/00112233445566778899aabbccddeeff00112233"

# read: both read tokens (rotation), never the ingest one, never from a URL
code "query, read token" 200 -H "$(bearer "$READ")" "$BASE/api/v1/jobs"
code "query, the old read token" 200 -H "$(bearer "$READ_OLD")" "$BASE/api/v1/jobs"
code "query, ingest token" 401 -H "$(bearer "$INGEST")" "$BASE/api/v1/jobs"
code "query, token in the URL" 401 "$BASE/api/v1/jobs?token=$READ"
code "no such path, no token" 401 "$BASE/api/v1/nosuch"
code "no such path, read token" 404 -H "$(bearer "$READ")" "$BASE/api/v1/nosuch"

# /metrics: protected by its token (or a read token); /healthz open
code "/metrics, no token" 401 "$BASE/metrics"
code "/metrics, ingest token" 401 -H "$(bearer "$INGEST")" "$BASE/metrics"
code "/metrics, metrics token" 200 -H "$(bearer "$METRICS")" "$BASE/metrics"
code "/metrics, read token" 200 -H "$(bearer "$READ")" "$BASE/metrics"
code "/healthz" 200 "$BASE/healthz"

# browsers: the pages send them to /login; a read token buys an HttpOnly,
# SameSite=Strict cookie that reads (and only reads)
code "page, not signed in" 303 "$BASE/"
grep -qi '^Location: /login' "$T/headers" || fail "not sent to /login"
code "login form" 200 "$BASE/login"
grep -q 'name="token"' "$T/body" || fail "no login form"
code "login, ingest token" 401 --data-urlencode "token=$INGEST" "$BASE/login"
code "login, read token" 303 --data-urlencode "token=$READ" "$BASE/login"
cookie=$(sed -n 's/^Set-Cookie: \(strata_token=[^;]*\);.*/\1/ip' "$T/headers" | tr -d '\r')
grep -i '^Set-Cookie:' "$T/headers" | grep -q 'HttpOnly; SameSite=Strict' || fail "cookie not HttpOnly/Strict"
[ -n "$cookie" ] || fail "no cookie set"
code "index page, cookie" 200 -H "Cookie: $cookie" "$BASE/"
grep -q 'href="/jobs/auth-job"' "$T/body" || fail "no job link: $(head -c 300 "$T/body")"
for t in "$INGEST" "$READ" "$READ_OLD" "$METRICS"; do
	grep -qF "$t" "$T/body" && fail "a token is in the page"
done
grep -qi '^X-Frame-Options: DENY' "$T/headers" || fail "page may be framed"
code "job page, cookie" 200 -H "Cookie: $cookie" "$BASE/jobs/auth-job"
code "query, cookie" 200 -H "Cookie: $cookie" "$BASE/api/v1/jobs"
[ "$(post -H "Cookie: $cookie")" = 401 ] || fail "the cookie ingested"
code "logout" 303 -H "Cookie: $cookie" "$BASE/logout"
grep -i '^Set-Cookie:' "$T/headers" | grep -q 'Max-Age=0' || fail "logout keeps the cookie"
stop_server

# A token file with a space, or none in it, is refused at start.
echo "two words" > "$T/bad"
"$SERVER" --listen 127.0.0.1:0 --store "sqlite:$T/x.db" --read-token-file "$T/bad" \
	> "$T/bad.log" 2>&1 && fail "a token with a space was taken"
grep -q "spaces" "$T/bad.log" || fail "no reason given: $(cat "$T/bad.log")"

# TLS on the server itself: TLS 1.2+ with the given key and certificate.
command -v openssl > /dev/null || skip "no openssl for the TLS part"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
	-keyout "$T/key.pem" -out "$T/cert.pem" 2> /dev/null || fail "openssl"
PORT=$(free_port)
"$SERVER" --listen "127.0.0.1:$PORT" --store "sqlite:$T/tls.db" --no-debuginfod \
	--ingest-token-file "$T/ingest" --read-token-file "$T/read" \
	--tls-cert "$T/cert.pem" --tls-key "$T/key.pem" > "$T/tls.log" 2>&1 &
SRV_PID=$!
HTTPS="https://127.0.0.1:$PORT"
for _ in $(seq 100); do
	curl -sf --cacert "$T/cert.pem" "$HTTPS/healthz" > /dev/null 2>&1 && break
	sleep 0.1
done
code "https /healthz, verified" 200 --cacert "$T/cert.pem" "$HTTPS/healthz"
code "https ingest" 200 --cacert "$T/cert.pem" -H "$(bearer "$INGEST")" -H 'Content-Encoding: zstd' \
	--data-binary "@$T/b.zst" "$HTTPS/api/v1/batches"
code "https login" 303 --cacert "$T/cert.pem" --data-urlencode "token=$READ" "$HTTPS/login"
grep -i '^Set-Cookie:' "$T/headers" | grep -q '; Secure' || fail "cookie over TLS not Secure"
code "plain http to the TLS port" 000 "http://127.0.0.1:$PORT/healthz"
code "TLS 1.1" 000 --cacert "$T/cert.pem" --tlsv1.1 --tls-max 1.1 "$HTTPS/healthz"
grep -q "(https)" "$T/tls.log" || fail "server did not say it serves https"
echo "ok: ingest, read and metrics tokens apart; no token in URLs or pages; cookie sign-in reads only; TLS"
