# Scenario: slow compute.  Rank 2's simulated kernels take 2x longer from
# the onset on, so it reaches every all-reduce ~16 ms after its peers; the
# server must confirm rank 2 (webhook) and rank the CUDA layer first (it
# blocks longer in stream syncs).
source "$(dirname "$0")/scenario_lib.sh"
export SIM_SLOW_RANK=2 SIM_SLOWDOWN=2
scenario_start
scenario_check --name slow_compute straggler 2 cuda
scenario_promtool StrataStragglerConfirmed StrataAgentDown

# The confirmation starts a deep capture (docs/diagnosis.md "Deep capture"):
# rank 2 and two healthy peers, one agent period after the decision so
# every agent starts it together; its trace holds the three ranks' timed
# samples and every GPU call.
python3 - "$PORT" "$TOKEN" "$SCEN_JOB" << 'PY' || fail "no straggler capture"
import json, sys, time, urllib.request
port, token, job = sys.argv[1:4]
def get(path):
    req = urllib.request.Request("http://127.0.0.1:%s%s" % (port, path),
                                 headers={"Authorization": "Bearer " + token})
    return json.load(urllib.request.urlopen(req, timeout=30))
deadline = time.time() + 60
caps = []
while time.time() < deadline and not caps:
    caps = [c for c in get("/api/v1/captures?job=" + job) if c["trigger"] == "straggler"]
    time.sleep(1)
assert caps, "no straggler capture"
c = caps[0]
ranks = {p["pid"]: p["rank"] for p in get("/api/v1/ranks?job=" + job)["processes"]
         if p.get("rank") is not None}
flagged = [ranks.get(t["pid"]) for t in c["targets"]]
assert len(flagged) == 3 and flagged[0] == 2 and 2 not in flagged[1:], (flagged, c)
assert c["start_ns"] - c["created_ns"] == 15 * 10**9, c  # one period and the upload (the lead)
while time.time() < deadline + 60:
    runs = get("/api/v1/captures/" + c["id"])["runs"]
    if runs and all(r["end_ns"] for r in runs):
        break
    time.sleep(1)
else:
    raise SystemExit("capture %s never ended: %s" % (c["id"], runs))
assert runs[0]["processes"] == 3 and abs(runs[0]["start_ns"] - c["start_ns"]) < 1.5e9, runs
time.sleep(11)  # the window of its last samples
tr = get("/api/v1/captures/%s/trace" % c["id"])
per = {}
for e in tr["traceEvents"]:
    if e.get("cat") in ("cpu", "launch") and e["ph"] in ("B", "X"):
        per.setdefault(e["pid"], set()).add(e["cat"])
assert set(per) == set(flagged) and all(v == {"cpu", "launch"} for v in per.values()), per
print("ok: straggler capture %s of ranks %s (%s)" % (c["id"], flagged, c["reason"]))
PY
