# Exited threads leave the scheduler layer's per-thread BPF map: 20000
# short-lived threads, one after another (more than the map's 16384
# entries), are all accounted, none refused (threads_full = 0), and the
# report still lists each one's final counters (kept in user space after
# retirement), each adding up exactly.
source "$(dirname "$0")/lib.sh"
require_bpf
command -v python3 >/dev/null || skip "needs python3"

"$STRATA" record -v --sched "$T/s.json" -o "$T/s.folded" -- "$FIX/sched_work" churn 20000 \
	2> "$T/err" || { cat "$T/err"; fail "record failed"; }
grep -E '^  sched:' "$T/err" || fail "no sched counters in -v output"
python3 - "$T/s.json" "$T/err" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
err = open(sys.argv[2]).read()
def fail(msg):
    print("FAIL:", msg); sys.exit(1)
c = d["counters"]
if c["threads_full"]:
    fail("per-thread map full: %d transitions lost" % c["threads_full"])
retired = int(re.search(r"^  sched:.* retired=(\d+)", err, re.M).group(1))
churn = [t for t in d["threads"] if t["comm"] == "t_churn"]
tids = {t["tid"] for t in churn}
print("ok: %d t_churn threads reported (%d distinct tids), %d retired from the map, threads_full=0"
      % (len(churn), len(tids), retired))
# A recycled tid can merge two threads' entries; nearly all are distinct.
if len(churn) < 19000:
    fail("only %d of 20000 threads reported" % len(churn))
if retired < 20000 - 16384:
    fail("only %d threads retired: the map would have filled" % retired)
for t in churn:
    total = t["oncpu_ns"] + t["runnable_ns"] + sum(t["offcpu_ns"].values())
    if sum(t["time_ns"].values()) != total:
        fail("tid %d: breakdown %d != accounted %d" % (t["tid"], sum(t["time_ns"].values()), total))
print("ok: every thread's breakdown adds up exactly")
PY
