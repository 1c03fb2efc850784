#!/usr/bin/env python3
"""strata-server soak (issue 15), driven by bench/server_soak.sh.

AGENTS simulated agents (one thread pool, one state each) each post one
batch (build/fixtures/gen_batch write: its own node, the next 10-s window)
every 10 s to a strata-server with its defaults on a small filesystem of its
own, and retry the SAME body (same batch id) until it is acknowledged, as
the real uploader does.  During the run the server is killed with SIGKILL
twice (back DOWN_S later) and its filesystem is filled once for FULL_S
seconds.  At the end every batch an agent got a 2xx for must be in the
store exactly once (by node and window start: batches table) and whole (its
200 samples in the batch row and in its cpu_samples rows), every batch made
must have been acknowledged, the database must pass integrity_check and
foreign_key_check, and the server must never have died but by our SIGKILLs.
Every 20th batch is posted again after its acknowledgement (a lost answer)
and must be answered "duplicate".
One "result:" line per measure.

Usage (as root, from the repository root):
  bench/server_soak.py MINUTES AGENTS WORKDIR SERVER
"""
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

MINUTES = float(sys.argv[1])
AGENTS = int(sys.argv[2])
WORK = sys.argv[3]
SERVER = sys.argv[4]
GEN = "build/fixtures/gen_batch"
PERIOD = 10.0
FULL_S = 30.0
SAMPLES = 200  # CPU samples per batch
REPLAY_EVERY = 20  # batches sent again after their acknowledgement
DOWN_S = 5.0  # a killed server is back after this long (a pod restart)
MNT = os.path.join(WORK, "mnt")
DB = os.path.join(MNT, "strata.db")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


PORT = free_port()
URL = "http://127.0.0.1:%d" % PORT
lock = threading.Lock()
stats = {"acked": 0, "stored": 0, "duplicate": 0, "retries": 0, "gen_failed": 0, "replays": 0,
         "replays_duplicate": 0}
errors = {}         # kind -> count
acked = {}          # (node, start_ns) -> times acknowledged
made = set()        # (node, start_ns) of every batch made
server = {"proc": None, "starts": 0, "crashes": 0}
log = open(os.path.join(WORK, "server.log"), "ab")


def start_server():
    p = subprocess.Popen([SERVER, "--listen", "127.0.0.1:%d" % PORT, "--store", "sqlite:" + DB,
                          "--no-debuginfod"], stdout=log, stderr=log)
    for _ in range(300):
        try:
            urllib.request.urlopen(URL + "/healthz", timeout=1).read()
            break
        except Exception:
            if p.poll() is not None:
                sys.exit("server exited at start: see %s/server.log" % WORK)
            time.sleep(0.1)
    with lock:
        server["proc"] = p
        server["starts"] += 1


def count_error(kind):
    with lock:
        errors[kind] = errors.get(kind, 0) + 1


def post_until_acked(body, key, deadline, replay=False):
    """Posts body until a 2xx or deadline; True when acknowledged.  replay:
    body was acknowledged before (its answer "lost"): counted apart."""
    tries = 0
    while time.time() < deadline:
        tries += 1
        req = urllib.request.Request(URL + "/api/v1/batches", data=body, method="POST",
                                     headers={"Content-Type": "application/x-strata-batch",
                                              "Content-Encoding": "zstd"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                ans = json.loads(r.read() or b"{}")
            with lock:
                if replay:
                    stats["replays"] += 1
                    stats["replays_duplicate"] += ans.get("status") == "duplicate"
                    return True
                stats["acked"] += 1
                stats["retries"] += tries - 1
                acked[key] = acked.get(key, 0) + 1
                st = ans.get("status", "stored")
                stats[st if st in ("stored", "duplicate") else "stored"] += 1
            return True
        except urllib.error.HTTPError as e:
            count_error("http_%d" % e.code)
        except (urllib.error.URLError, ConnectionError, socket.timeout, OSError) as e:
            count_error("connect" if "refused" in str(e).lower() or isinstance(e, ConnectionError)
                        else type(e).__name__)
        time.sleep(min(0.5 * tries, 5.0))  # the uploader backs off too
    return False


def agent_step(i, window):
    node = "soak-%03d" % i
    start_s = BASE_S + int(window * PERIOD)
    out = os.path.join(WORK, "b", "%s-%d.zst" % (node, window))
    r = subprocess.run([GEN, "write", out, "--node", node, "--job", "soak", "--ranks", "1",
                        "--stacks", "20", "--depth", "12", "--samples", str(SAMPLES), "--libs", "3",
                        "--start", str(start_s)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    if r.returncode != 0:
        with lock:
            stats["gen_failed"] += 1
        return
    key = (node, start_s * 10**9)
    with lock:
        made.add(key)
    body = open(out, "rb").read()
    os.unlink(out)
    # Every REPLAY_EVERY-th batch is sent again once acknowledged, as by an
    # agent that lost the answer (the server's dedupe path, which SIGKILLs
    # alone rarely reach): it must be answered "duplicate", not stored twice.
    if (post_until_acked(body, key, time.time() + 300) and
            (window * AGENTS + i) % REPLAY_EVERY == 0):
        post_until_acked(body, key, time.time() + 300, replay=True)


def sample(t0, minute_rows):
    p = server["proc"]
    try:
        rss = int([l.split()[1] for l in open("/proc/%d/status" % p.pid)
                   if l.startswith("VmRSS")][0])
        f = open("/proc/%d/stat" % p.pid).read().rsplit(")", 1)[1].split()
        cpu = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError):
        rss, cpu = -1, -1
    with lock:
        minute_rows.append((round((time.time() - t0) / 60, 1), p.pid, rss, cpu, stats["acked"],
                            sum(errors.values())))


def fill_disk():
    """Fills the store's filesystem; returns the filler's path."""
    path = os.path.join(MNT, "filler")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    size = 1 << 20
    while size >= 512:  # down to the last block
        try:
            os.write(fd, b"\0" * size)
        except OSError:
            size //= 2
    os.fsync(fd)
    os.close(fd)
    st = os.statvfs(MNT)
    print("event: %d bytes free after the fill" % (st.f_bavail * st.f_frsize), flush=True)
    return path


BASE_S = int(time.time()) - 10
os.makedirs(os.path.join(WORK, "b"), exist_ok=True)
start_server()
t0 = time.time()
end = t0 + MINUTES * 60
events = [(0.25, "kill"), (0.4, "full"), (0.8, "kill")]
minute_rows = []
next_sample = t0
windows = [0] * AGENTS
pool = ThreadPoolExecutor(max_workers=32)
futs = []
filler = None
full_until = full_since = 0
errors_at_full = 0
restart_at = 0
while time.time() < end:
    now = time.time()
    if events and now >= t0 + events[0][0] * (end - t0):
        what = events.pop(0)[1]
        if what == "kill":
            p = server["proc"]
            p.send_signal(signal.SIGKILL)
            p.wait()
            print("event: SIGKILL at %.1f min, restarting in %.0f s" % ((now - t0) / 60, DOWN_S),
                  flush=True)
            restart_at = now + DOWN_S
        else:
            filler = fill_disk()
            errors_at_full = sum(errors.values())
            full_since = time.time()
            full_until = full_since + 180  # until FULL_S after the first refusal
            print("event: disk full at %.1f min" % ((now - t0) / 60), flush=True)
    if filler and full_until - full_since >= 180 and sum(errors.values()) > errors_at_full:
        full_until = time.time() + FULL_S
        print("event: the server refuses at %.1f min (%.0f s after the disk filled)" %
              ((time.time() - t0) / 60, time.time() - full_since), flush=True)
    if filler and time.time() >= full_until:
        os.unlink(filler)
        filler = None
        print("event: disk freed at %.1f min" % ((time.time() - t0) / 60), flush=True)
    if now >= next_sample:
        sample(t0, minute_rows)
        next_sample += 60
    # Agent i posts its window w at t0 + (w + i / AGENTS) * PERIOD: spread
    # over the period, as agents started at different times are.
    for i in range(AGENTS):
        if now >= t0 + (windows[i] + i / AGENTS) * PERIOD:
            futs.append(pool.submit(agent_step, i, windows[i]))
            windows[i] += 1
    futs = [f for f in futs if not f.done()]
    if restart_at and now >= restart_at:
        restart_at = 0
        start_server()
    if not restart_at and server["proc"].poll() is not None:  # a crash: FAIL
        server["crashes"] += 1
        count_error("server_died_%d" % server["proc"].returncode)
        start_server()
    time.sleep(0.05)
if filler:
    os.unlink(filler)
print("waiting for %d agents' last posts" % len(futs), flush=True)
pool.shutdown(wait=True)
sample(t0, minute_rows)
p = server["proc"]
died = p.poll()
p.send_signal(signal.SIGTERM)
p.wait()

db = sqlite3.connect(DB)
rows = db.execute(
    "SELECT node, start_ns, count(*) FROM batches WHERE node LIKE 'soak-%' GROUP BY node, start_ns"
).fetchall()
stored = {(n, s): c for n, s, c in rows}
# "stored" means whole: the batch row's count and its sample rows' (one
# transaction per batch in the store; a retry of a half-stored batch would
# be answered "duplicate" and its samples lost for good)
partial = db.execute(
    "SELECT count(*) FROM batches b WHERE node LIKE 'soak-%' AND (cpu_samples != ?1 OR"
    " (SELECT coalesce(sum(count), 0) FROM cpu_samples c WHERE c.batch = b.id) != ?1)",
    (SAMPLES,)).fetchone()[0]
integrity = " ".join(r[0] for r in db.execute("PRAGMA integrity_check").fetchall())
fk_bad = len(db.execute("PRAGMA foreign_key_check").fetchall())
db.close()
lost = [k for k in acked if k not in stored]
dups = [k for k, c in stored.items() if c > 1]
unacked = [k for k in made if k not in acked]
for m, pid, rss, cpu, n, e in minute_rows:
    print("result: minute=%.1f server_pid=%d rss_kb=%d cpu_s=%.1f acked=%d errors=%d" %
          (m, pid, rss, cpu, n, e))
print("result: agents=%d minutes=%.1f windows=%d batches_made=%d acked=%d stored_rows=%d "
      "answers_stored=%d answers_duplicate=%d retries=%d server_starts=%d gen_failed=%d" %
      (AGENTS, MINUTES, max(windows), len(made), len(acked), sum(stored.values()), stats["stored"],
       stats["duplicate"], stats["retries"], server["starts"], stats["gen_failed"]))
print("result: errors %s" % json.dumps(errors, sort_keys=True))
print("result: replayed_after_ack=%d answered_duplicate=%d" %
      (stats["replays"], stats["replays_duplicate"]))
print("result: lost=%d duplicates=%d partial=%d unacknowledged=%d integrity=%s "
      "foreign_key_violations=%d server_crashes=%d server_alive_at_end=%s" %
      (len(lost), len(dups), partial, len(unacked), integrity, fk_bad, server["crashes"],
       died is None))
ok = (not lost and not dups and not partial and not unacked and integrity == "ok" and
      not fk_bad and not server["crashes"] and died is None and not stats["gen_failed"] and
      stats["replays"] == stats["replays_duplicate"])
print("result: verdict=%s" % ("ok" if ok else "FAIL"))
sys.exit(0 if ok else 1)
