# The scheduler layer on real workloads: each thread of sched_work spends
# its time one known way, and the report must put it in that category: a
# sleeper (sleep), fdatasync on the disk (io, kernel stack in the block
# layer / journal), a contended mutex (lock, futex in the kernel stack), a
# thread inside a marked API layer (collective), and two busy processes
# pinned to one CPU (runnable ~50%).  The breakdown adds up exactly.
source "$(dirname "$0")/lib.sh"
require_bpf
command -v python3 >/dev/null || skip "needs python3"

"$STRATA" record --sched "$T/s.json" --sched-test-layers "$FIX/sched_work" -o "$T/s.folded" \
	-- "$FIX/sched_work" 3 "$T" 2> "$T/err" || { cat "$T/err"; fail "record failed"; }

python3 - "$T/s.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
threads = {t["comm"]: t for t in d["threads"]}
def fail(msg):
    print("FAIL:", msg); sys.exit(1)
def total(t):
    return t["oncpu_ns"] + t["runnable_ns"] + sum(t["offcpu_ns"].values())
for t in d["threads"]:
    if sum(t["time_ns"].values()) != total(t):
        fail("%s: breakdown %d != accounted %d" % (t["comm"], sum(t["time_ns"].values()), total(t)))
print("ok: breakdown adds up exactly for %d threads" % len(d["threads"]))
# Shares of the time the thread was not waiting for a CPU: the test machine
# is shared, and CPU contention (runnable) must not hide the category.
def share(comm, field, key, pct):
    t = threads.get(comm) or fail("no thread " + comm)
    v = t[field][key]
    base = max(total(t) - t["runnable_ns"], 1)
    s = 100.0 * v / base
    if s < pct:
        fail("%s: %s.%s is %.1f%% of %.2f s not runnable, want >= %d%%" % (comm, field, key, s, base / 1e9, pct))
    print("ok: %s: %s %s %.1f%% of %.2f s not runnable" % (comm, field, key, s, base / 1e9))
share("t_sleep", "offcpu_ns", "sleep", 80)
share("t_sleep", "time_ns", "other", 80)
# fdatasync's share of t_io's time depends on the disk (a fast disk leaves
# most of it on the CPU, 41% io on one CI machine, 65% here); what the layer
# owes is that the time it blocked is io, and that it is io_wait.
tio = threads.get("t_io") or fail("no thread t_io")
blocked = sum(tio["offcpu_ns"].values())
if blocked < 0.1e9 or tio["offcpu_ns"]["io"] < 0.9 * blocked:
    fail("t_io: io %d ns of %d ns blocked, want >= 90%% of >= 0.1 s: %s" % (tio["offcpu_ns"]["io"], blocked, tio["offcpu_ns"]))
if tio["time_ns"]["io_wait"] != tio["offcpu_ns"]["io"] + tio["offcpu_ns"]["page_fault"]:
    fail("t_io: io_wait %d != io + page_fault: %s" % (tio["time_ns"]["io_wait"], tio))
print("ok: t_io: io %.1f%% of %.2f s blocked, all io_wait" % (100.0 * tio["offcpu_ns"]["io"] / blocked, blocked / 1e9))
share("t_lock", "offcpu_ns", "lock", 80)
share("t_lock", "time_ns", "lock_wait", 80)
# Inside the marked call the whole time is collective, except waiting for a
# CPU (runnable wins: the other spinning threads contend for 2 CPUs here).
share("t_layer", "time_ns", "collective", 97)
tl = threads["t_layer"]["time_ns"]
inside = 100.0 * (tl["collective"] + tl["runnable"]) / total(threads["t_layer"])
if inside < 97 or tl["cpu"] > 0.02 * total(threads["t_layer"]):
    fail("t_layer: collective+runnable %.1f%%, cpu %d ns" % (inside, tl["cpu"]))
print("ok: t_layer: collective+runnable %.1f%%" % inside)
# Blocking stacks name the kernel path.
def stacks(comm_tid, reason):
    return [o for o in d["offcpu"] if o["tid"] == comm_tid and o["reason"] == reason]
lock = stacks(threads["t_lock"]["tid"], "lock")
if not any("futex" in f for o in lock for f in o["kernel"]):
    fail("no futex frame in t_lock's lock stacks: %s" % lock[:2])
print("ok: t_lock blocks in futex_wait (%d stacks)" % len(lock))
io = stacks(threads["t_io"]["tid"], "io")
if not io or not any(o["user"] for o in io):
    fail("t_io: no io stacks with user frames")
print("ok: t_io io stacks: %d" % len(io))
# Stacks are walked at most once per ms per thread, so long blocks nearly
# always get theirs (the ms passed while blocked before) and blocks of
# ~100 us mostly do not: the share over all threads follows the mix (the
# lock ping-pong's and a fast disk's short blocks: 42% on one run, over
# 50% on others).  What the layer owes: the threads whose blocks are long
# (t_sleep 10 ms, t_layer 20 ms) have their stacks.
def walked_share(comm):
    tid = threads[comm]["tid"]
    mine = [o for o in d["offcpu"] if o["tid"] == tid]
    allns = sum(o["ns"] for o in mine)
    return 100.0 * sum(o["ns"] for o in mine if o["kernel"]) / max(allns, 1), allns
for comm in ("t_sleep", "t_layer"):
    pct, ns = walked_share(comm)
    if pct < 90:
        fail("%s: only %.1f%% of its %.2f s off-CPU has a stack" % (comm, pct, ns / 1e9))
    print("ok: %s: %.1f%% of its %.2f s off-CPU has its stack" % (comm, pct, ns / 1e9))
walked = sum(o["ns"] for o in d["offcpu"] if o["kernel"])
allns = sum(o["ns"] for o in d["offcpu"])
print("info: %.1f%% of all off-CPU time has its stack" % (100.0 * walked / max(allns, 1)))
if not d["irq"]:
    fail("no interrupt time at all")
print("ok: %d cpu/irq entries, counters %s" % (len(d["irq"]), d["counters"]))
PY

# CPU contention: two busy processes on one CPU each wait about half the time.
"$STRATA" record --sched "$T/c.json" -o "$T/c.folded" -- sh -c \
	"taskset -c 0 $FIX/sched_work spin 2 & taskset -c 0 $FIX/sched_work spin 2; wait" \
	2> "$T/err" || { cat "$T/err"; fail "record failed"; }
python3 - "$T/c.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
spins = [t for t in d["threads"] if t["comm"] == "t_spin"]
if len(spins) != 2:
    print("FAIL: want 2 t_spin threads, got", [t["comm"] for t in d["threads"]]); sys.exit(1)
for t in spins:
    run = t["oncpu_ns"] + t["runnable_ns"]
    s = 100.0 * t["runnable_ns"] / max(run, 1)
    # Alone on CPU 0 they would wait half the time each; other load on
    # the shared test machine only adds waiting.
    if not 35 <= s <= 85:
        print("FAIL: t_spin %d runnable %.1f%% of %.2f s, want ~50%%" % (t["tid"], s, run / 1e9)); sys.exit(1)
    print("ok: t_spin %d runnable %.1f%% of %.2f s" % (t["tid"], s, run / 1e9))
# CPU 0's time: the two spinners plus what others ran there (foreign).
wall = max(t["oncpu_ns"] + t["runnable_ns"] for t in spins)
cpu0 = sum(t["oncpu_ns"] for t in spins) + sum(f["ns"] for f in d["foreign"] if f["cpu"] == 0)
share = 100.0 * cpu0 / wall
if not 85 <= share <= 110:
    print("FAIL: CPU 0: spinners + foreign = %.1f%% of %.2f s" % (share, wall / 1e9)); sys.exit(1)
print("ok: CPU 0: spinners + other processes = %.1f%% of %.2f s" % (share, wall / 1e9))
PY
