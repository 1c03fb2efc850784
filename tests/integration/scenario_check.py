"""Judges one end-to-end scenario (tests/integration/scenario_lib.sh) from
strata-server's API and the webhook receiver's log, in real time.

  scenario_check.py --port P --dir T straggler RANK LAYER
      the server confirms RANK (and no other) as a straggler
      (/api/v1/stragglers, pinned fields), fires one webhook for it at most
      --max-alert seconds (15) after the onset, and
      /api/v1/findings?rank=RANK ranks LAYER first (within --timeout)
  scenario_check.py ... leak RANK
      /api/v1/leak_reports names RANK's leak_activation stack; no straggler
  scenario_check.py ... none
      SECONDS of a healthy job: windows judged, no straggler, no leak, no
      webhook (the false-positive check)

Prints the detected rank, layer and seconds from the fault onset (printed
by train_sim) to the alert; with $SCENARIO_RESULTS set, appends the result
as one JSON line there (docs/benchmarks.md's table).
"""
import argparse
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request

PINNED = ('job', 'communicator', 'rank', 'node', 'pid', 'lag_seconds', 'score', 'since')


class Scenario:
    def __init__(self, args):
        self.base = 'http://127.0.0.1:%d' % args.port
        self.dir = args.dir
        self.window = args.window_ms / 1000.0
        out = open(os.path.join(self.dir, 'train.out')).read()
        self.onset = float(re.search(r'fault onset at ([0-9.]+)', out).group(1))
        self.job = None
        self.want_job = args.job

    def get(self, path):
        req = urllib.request.Request(self.base + path)
        if os.environ.get('STRATA_TOKEN'):
            req.add_header('Authorization', 'Bearer ' + os.environ['STRATA_TOKEN'])
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read().decode()
        return body if path == '/metrics' or path.startswith('/jobs/') else json.loads(body)

    def hooks(self):
        """[(received_at, payload)] of every webhook POST so far."""
        path = os.path.join(self.dir, 'hooks')
        if not os.path.exists(path):
            return []
        out = []
        for line in open(path).read().splitlines():
            at, body = line.split(' ', 1)
            out.append((float(at), json.loads(body)))
        return out

    def find_job(self, timeout=40):
        """The simulated job: --job NAME once its 4 ranks reported (the
        agents ship every 10 s), else the one job whose 4 ranks did."""
        end = time.time() + timeout
        while time.time() < end:
            jobs = [j for j in self.get('/api/v1/jobs')['jobs'] if j.get('ranks') == 4 and
                    (not self.want_job or j['job'] == self.want_job)]
            if jobs:
                self.job = jobs[0]['job']
                return
            time.sleep(0.25)
        fail('no job with 4 ranks after %d s: %s' % (timeout, self.get('/api/v1/jobs')))

    def rank_pid(self, rank):
        procs = self.get('/api/v1/processes')['processes']
        pids = [p['pid'] for p in procs if p.get('rank') == rank and p.get('job') == self.job]
        return pids[0] if pids else None

    def confirmed(self):
        return [s for s in self.get('/api/v1/stragglers?job=' + self.job)
                if s.get('state', 'confirmed') == 'confirmed']

    def leaks(self):
        return self.get('/api/v1/leak_reports?job=' + self.job)


def fail(msg):
    print('FAIL: ' + msg)
    sys.exit(1)


def record(result):
    print('scenario %(scenario)s: detected rank %(rank)s layer %(layer)s (%(detail)s), '
          'onset->alert %(onset_to_alert_s)s s (%(alert)s)' % result)
    path = os.environ.get('SCENARIO_RESULTS')
    if path:
        with open(path, 'a') as f:
            f.write(json.dumps(result) + '\n')


def check_straggler(sc, args):
    rank, layer = args.rank, args.layer
    deadline = sc.onset + args.timeout
    confirmed_at = None
    while time.time() < deadline:
        conf = sc.confirmed()
        if conf and confirmed_at is None:
            confirmed_at = time.time()
        firing = [h for h in sc.hooks() if h[1]['status'] == 'firing']
        if conf and firing:
            break
        time.sleep(0.25)
    else:
        fail('no confirmed straggler with a webhook %d s after the onset: %s, hooks %s' %
             (args.timeout, sc.get('/api/v1/stragglers?all=1&job=' + sc.job), sc.hooks()))
    if len(conf) != 1 or conf[0]['rank'] != rank:
        fail('want rank %d alone confirmed, got %s' % (rank, conf))
    s = conf[0]
    missing = [k for k in PINNED if k not in s]
    if missing:
        fail('straggler lacks pinned fields %s: %s' % (missing, s))
    pid = sc.rank_pid(rank)
    if s['job'] != sc.job or s['node'] != 'scen-node' or s['pid'] != pid or s['lag_seconds'] <= 0:
        fail('straggler fields (want job %s, node scen-node, pid %s): %s' % (sc.job, pid, s))
    # since: start of the first hot window, which holds the onset or follows it
    if s['since'] < sc.onset - sc.window:
        fail('since %.3f is before the onset %.3f' % (s['since'], sc.onset))

    at, hook = firing[0]
    labels = hook['alerts'][0]['labels']
    if len(firing) != 1 or labels['rank'] != str(rank) or labels['job'] != sc.job:
        fail('want one firing webhook for rank %d, got %s' % (rank, firing))
    if args.max_alert and at - sc.onset > args.max_alert:
        fail('the webhook came %.1f s after the onset (at most %.0f)' % (at - sc.onset,
                                                                      args.max_alert))

    # The alert is decided at ingest; the findings compare complete windows
    # of stored data, so they may come a window or two later.  The wanted
    # evidence too: a window judged before the fault's (some other process
    # on the rank's CPU) names what ran then.
    def wanted_hits(finds):
        hits = []
        for want in args.want_finding or []:
            metric, _, evidence = want.partition(':')
            hit = [f for f in finds if f['metric'] in metric.split(',') and
                   any(evidence in e for e in f.get('evidence', []))]
            if not hit:
                return None, (metric, evidence)
            hits.append(hit[0])
        return hits, None

    while True:
        try:
            finds = sc.get('/api/v1/findings?job=%s&rank=%d' % (sc.job, rank))
        except Exception:  # 404 until a window is judged
            finds = []
        hits, missing = wanted_hits(finds) if finds else (None, None)
        if finds and finds[0]['layer'] == layer and hits is not None:
            break
        if time.time() >= deadline:
            if finds and finds[0]['layer'] == layer:
                fail('want finding %s with evidence naming %r among rank %d\'s: %s' %
                     (missing[0], missing[1], rank, finds))
            fail('want layer %s first in the findings of rank %d: %s' % (layer, rank, finds))
        time.sleep(0.5)
    findings_at = time.time()
    top = finds[0]
    for hit in hits:
        print('finding: %s %.3f vs peers %.3f: %s' %
              (hit['metric'], hit['value'], hit['peer_median'], hit['evidence']))
    metrics = sc.get('/metrics')
    if not re.search(r'^strata_straggler_confirmed\{job="%s",[^}]*rank="%d"[^}]*\} 1$' %
                     (re.escape(sc.job), rank), metrics, re.M):
        fail('/metrics lacks strata_straggler_confirmed 1 for rank %d' % rank)
    page = sc.get('/jobs/' + sc.job)
    if 'rank %d' % rank not in page or top['metric'] not in page:
        fail('job page lacks the straggler or its top finding')
    record({'scenario': args.name, 'rank': s['rank'], 'layer': top['layer'],
            'detail': '%s %.3f vs peers %.3f; lag %.1f ms, score %.2f' %
                      (top['metric'], top['value'], top['peer_median'],
                       s['lag_seconds'] * 1e3, s['score']),
            'onset_to_alert_s': round(at - sc.onset, 1), 'alert': 'webhook',
            'onset_to_api_s': round(confirmed_at - sc.onset, 1),
            'onset_to_findings_s': round(findings_at - sc.onset, 1)})


def check_leak(sc, args):
    rank = args.rank
    deadline = sc.onset + args.timeout
    while time.time() < deadline:
        leaks = sc.leaks()
        if leaks:
            at = time.time()
            break
        time.sleep(0.25)
    else:
        fail('no leak report %d s after the onset' % args.timeout)
    pid = sc.rank_pid(rank)
    bad = [l for l in leaks if l['rank'] != rank or l['pid'] != pid]
    if bad or 'leak_activation' not in leaks[0]['stack']:
        fail('want leaks of rank %d (pid %s) at leak_activation only: %s' % (rank, pid, leaks))
    l = leaks[0]
    if l['growth_bytes_per_second'] <= 0:
        fail('leak without growth: %s' % l)
    metrics = sc.get('/metrics')
    if not re.search(r'^strata_gpu_leak_growth_bytes_per_second\{[^}]*pid="%d"' % pid,
                     metrics, re.M):
        fail('/metrics lacks strata_gpu_leak_growth_bytes_per_second for pid %d' % pid)
    if sc.confirmed() or sc.hooks():
        fail('a leak is no straggler: %s %s' % (sc.confirmed(), sc.hooks()))
    record({'scenario': args.name, 'rank': l['rank'], 'layer': 'cuda',
            'detail': 'leak at leak_activation, %.1f MiB/s over %d windows, tau %.2f' %
                      (l['growth_bytes_per_second'] / 2**20, l['windows'], l['tau']),
            'onset_to_alert_s': round(at - sc.onset, 1), 'alert': 'leak_reports / metric'})


def check_none(sc, args):
    end = sc.onset + args.timeout
    while time.time() < end:
        conf, leaks, hooks = sc.confirmed(), sc.leaks(), sc.hooks()
        if conf or leaks or hooks:
            fail('false positive on a healthy job: stragglers %s leaks %s hooks %s' %
                 (conf, leaks, hooks))
        time.sleep(0.5)
    tracked = sc.get('/api/v1/stragglers?all=1&job=' + sc.job)
    if sorted(s['rank'] for s in tracked) != [0, 1, 2, 3]:
        fail('want all 4 ranks judged, got %s' % tracked)
    worst = max(tracked, key=lambda s: s['score'])
    record({'scenario': args.name, 'rank': '-', 'layer': '-',
            'detail': 'no straggler, no leak, no webhook in %d s; worst rank %d score %.3f' %
                      (args.timeout, worst['rank'], worst['score']),
            'onset_to_alert_s': '-', 'alert': 'none'})


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--port', type=int, required=True)
    p.add_argument('--dir', required=True)
    p.add_argument('--job', default=None, help='the job name to find')
    p.add_argument('--window-ms', type=int, default=2000)
    p.add_argument('--timeout', type=float, default=60, help='seconds after the onset')
    p.add_argument('--max-alert', type=float, default=15,
                   help='straggler: the webhook at most this long after the onset (0: any)')
    p.add_argument('--name', default=None)
    p.add_argument('--want-finding', action='append',
                   help='METRIC[,METRIC...]:EVIDENCE, a finding of the straggler rank (one '
                   'of the metrics) whose evidence contains EVIDENCE')
    p.add_argument('mode', choices=('straggler', 'leak', 'none'))
    p.add_argument('rank', type=int, nargs='?')
    p.add_argument('layer', nargs='?')
    args = p.parse_args()
    args.name = args.name or args.mode
    sc = Scenario(args)
    sc.find_job()
    {'straggler': check_straggler, 'leak': check_leak, 'none': check_none}[args.mode](sc, args)


if __name__ == '__main__':
    main()
