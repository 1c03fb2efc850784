#!/usr/bin/env bash
# The scheduler layer's blocking stacks do not run out over the uptime
# (shipped DaemonSet args, server defaults).  A labelled process blocks
# from 20,000 distinct user stacks over four 10-s windows (offcpu_paths: 5
# threads, 4,000 paths each, 10 ms sleeps), about 5,000 a window: more
# than a node's jobs make in a day, in 40 s.  Every block must reach the
# server with its own stack, and the agent must count no stack lost.
# Before, the stacks went into one 16,384-bucket stack map that was never
# cleared: once it filled (hash collisions start well before), every later
# block on the node came back without a stack, for good (11,603 of 20,000
# here, stack_lost=8387).  And the blocks of a process's last window were
# resolved at the window's end, after the process and its mappings were
# gone: they reached the server unnamed (2,187 of them here).
source "$(dirname "$0")/scenario_lib.sh"
PATHS=$ROOT/build/fixtures/offcpu_paths
[ -x "$PATHS" ] || fail "$PATHS not built (make fixtures)"

scenario_server
scenario_agent
wait_agent_ready "$T/agent.log"
JOB=stacks-$$
# found by its label at a drain (every second) before it blocks
STRATA_JOB=$JOB sh -c 'echo $$ > "$1"; sleep 3; exec "$0" 5 4000 10' "$PATHS" "$T/pid" \
	> "$T/paths.out" 2>&1 || fail "offcpu_paths failed: $(cat "$T/paths.out")"
grep -q '^paths 20000$' "$T/paths.out" || fail "offcpu_paths: $(cat "$T/paths.out")"
sleep 12 # the last window closes and is shipped
scenario_agent_stop INT
line=$(grep '^  sched:' "$T/agent.log" | tail -1) || fail "no sched counters: $(tail "$T/agent.log")"
echo "agent: $(echo "$line" | grep -oE '(stack_lost|stacks_full|offcpu_full|stacks_missing)=[0-9]*' | tr '\n' ' ')"
for c in stack_lost stacks_full offcpu_full stacks_missing; do
	v=$(echo "$line" | sed -n "s/.* $c=\([0-9]*\).*/\1/p")
	[ "${v:-x}" = 0 ] || fail "$c=${v:-missing}: $line"
done

api "/api/v1/profile?format=json&kind=offcpu&job=$JOB" > "$T/offcpu.json" ||
	fail "no off-CPU profile for $JOB"
python3 - "$T/offcpu.json" << 'PY' || fail "blocking stacks through the server"
import json, sys
d = json.load(open(sys.argv[1]))
frames = d["frames"]
# the walkers' blocks: 16 path_a/path_b frames (the 17th, the leaf, is
# lost: libc's sleep keeps no frame pointer) between the sleep and the
# thread's start; told apart by frame, then by name
stacks, named = set(), 0
for s in d["samples"]:
    user = [f for f in s["frames"] if not frames[f]["kernel"]]
    if len(user) >= 19:
        stacks.add(tuple(user))
        named += sum(1 for f in user if (frames[f]["func"] or "").startswith("path_")) >= 16
print("distinct blocking stacks at the server: %d (%d named)" % (len(stacks), named))
# every block was walked (10 ms apart, the walk limit is 1 ms); a few at
# the start may precede the label scan
assert len(stacks) >= 19800, "want >= 19800 of the 20000 stacks, got %d" % len(stacks)
print("ok: %d of 20000 distinct blocking stacks kept" % len(stacks))
# named too, the last seconds' as well: the process exited before the
# window's end, and its blocks are resolved at the drain after they ended
assert named >= 19800, "want >= 19800 named, got %d" % named
print("ok: %d of them named, the blocks of the process's last window too" % named)
PY

# The main thread blocked every 20 ms from one stack, in each of a window's
# ten drains: one row per window, not one per drain (the wire and the
# store would grow tenfold for a steady blocking pattern).
python3 - "$T/server.db" "$(cat "$T/pid")" << 'PY' || fail "off-CPU rows per window"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows, blocks, batches = db.execute(
    "SELECT COUNT(*), SUM(count), COUNT(DISTINCT batch) FROM offcpu_samples t"
    " JOIN processes p ON p.id = t.process WHERE p.pid = ? AND t.tid = ?",
    (int(sys.argv[2]), int(sys.argv[2]))).fetchone()
print("main thread: %d blocks in %d rows over %d batches" % (blocks or 0, rows, batches))
assert (blocks or 0) >= 1000, "want the ticker's ~2000 blocks, got %s" % blocks
assert rows <= 2 * batches, "%d rows in %d batches: not merged" % (rows, batches)
print("ok: the window's drains add up in one row per stack")
PY
