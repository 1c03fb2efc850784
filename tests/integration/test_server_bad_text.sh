# Names that are not text (issue 15): a batch whose job, node and comm hold
# invalid UTF-8, control characters and markup still gives valid JSON on
# every query path, well-formed XML for the flame graph and its diff, and
# UTF-8 pages and metrics without raw control characters (an ESC in a
# label recolours the terminal of whoever curls /metrics).  Needs no BPF.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/server_lib.sh"

PORT=$(free_port)
start_server "$PORT" --diag-on-query
JOB=$'job-\xff\xfe-\x01\x1b[31m-"q"\\'
"$GEN" write "$T/b.zst" --stacks 20 --depth 6 --samples 400 --ranks 2 --gpu \
	--start $(($(date +%s) - 60)) --job "$JOB" --node $'node-\xc3\x28-\x7f' --comm $'py\xe2\x82\x01<&">\n' > /dev/null
code=$(curl -s -o "$T/resp" -w '%{http_code}' -H 'Content-Encoding: zstd' \
	--data-binary "@$T/b.zst" "http://127.0.0.1:$PORT/api/v1/batches")
[ "$code" = 200 ] || fail "batch refused: $code $(cat "$T/resp")"
qjob=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1].encode("utf-8", "surrogateescape"), safe=""))' "$JOB")

python3 - "http://127.0.0.1:$PORT" "$qjob" <<'PY'
import json, sys, urllib.error, urllib.request, xml.dom.minidom
base, job = sys.argv[1], sys.argv[2]

def get(path):
    # an error answer (e.g. 404 naming the job) must be valid JSON too
    try:
        with urllib.request.urlopen(base + path) as r:
            return r.read()
    except urllib.error.HTTPError as e:
        print(f"  {path}: HTTP {e.code}")
        return e.read()

def text(path):
    body = get(path).decode("utf-8")  # strict: raises on invalid UTF-8
    bad = [c for c in body if ord(c) < 0x20 and c not in "\n\t" or ord(c) == 0x7f]
    assert not bad, f"{path}: raw control characters {bad[:5]}"
    return body

for path in ["/api/v1/jobs", "/api/v1/nodes", "/api/v1/processes",
             "/api/v1/profile?format=json", "/api/v1/profile/diff?format=json&base.rank=!0",
             "/api/v1/leaks", "/api/v1/tally", "/api/v1/collectives", "/api/v1/trace",
             "/api/v1/stragglers", f"/api/v1/findings?job={job}&rank=1",
             f"/api/v1/breakdown?job={job}", f"/api/v1/leak_reports?job={job}"]:
    v = json.loads(text(path))
    print("json ok:", path)
procs = json.loads(text("/api/v1/processes"))["processes"]
assert any("\ufffd" in p["comm"] and "<&\">" in p["comm"] for p in procs), procs[:1]
assert any(p["job"].startswith("job-\ufffd") for p in procs), procs[:1]
for path in ["/api/v1/profile?format=svg", "/api/v1/profile/diff?format=svg&base.rank=!0"]:
    xml.dom.minidom.parseString(get(path))  # expat: well-formed XML 1.0 or raises
    print("xml ok:", path)
for path in ["/", f"/jobs/{job}", "/metrics"]:
    text(path)
    print("utf-8 ok:", path)
# the data lies in judged windows (--start): the job is a label of the
# collective and rank-time series, so the check above saw it
metrics = text("/metrics")
assert 'job="job-\ufffd\ufffd-\ufffd\ufffd[31m-\\"q\\"\\\\"' in metrics, \
    [l for l in metrics.splitlines() if "job=" in l][:2]
assert 'node="node-\ufffd(-\ufffd"' in metrics, [l for l in metrics.splitlines() if "node=" in l][:2]
PY
# An agent's collective name is markup on the job page of a hang (it was
# written there raw: script on the server's origin for every reader).
mkdir -p "$T/h"
"$ROOT/build/fixtures/gen_scenario" "$T/h" --fault hang --rank 1 --windows 12 --onset 2 \
	--job xssjob --op '<svg onload=alert(1)>' --start $(($(date +%s) - 14)) > /dev/null
for f in "$T"/h/*.zst; do
	curl -sf --data-binary @"$f" "http://127.0.0.1:$PORT/api/v1/batches" > /dev/null ||
		fail "POST $f"
done
curl -sf "http://127.0.0.1:$PORT/jobs/xssjob" > "$T/hang.html" || fail "job page of xssjob"
grep -q '<h3>missing: &lt;svg onload=alert(1)&gt; #40 ' "$T/hang.html" ||
	fail "the hang's op not on the page, escaped: $(grep -o '<h3>[^/]*' "$T/hang.html" | head -3)"
grep -q '<svg onload' "$T/hang.html" && fail "the hang's op is markup on the page"
echo "ok: invalid UTF-8, control characters and markup in names: valid JSON, XML, pages, metrics"
