"""Turns one real /metrics scrape of strata-server into a `promtool test
rules` file for the shipped alert rules, so the rules are proven on the
metric names and labels the server really exports (not on hand-written
series).

  metrics_to_promtool.py METRICS_TXT RULES_YML ALERTNAME... > test.yml

Every scraped sample becomes an input series held at its value for 15
minutes.  For each named alert the expected firing set is derived from the
scrape the way the rule reads it: StrataStragglerConfirmed for every
strata_straggler_confirmed sample at 1, StrataGpuMemoryLeak for every
strata_gpu_leak_growth_bytes_per_second above 0; checked once the rule's
`for` has passed, with its labels and its annotations rendered.
StrataAgentDown: the scrape's strata_agent_last_batch_timestamp_seconds are
moved onto promtool's clock (the newest at 0) and nothing is heard after,
so every node trips it once the rule's silence and `for` have passed.
Prints to stderr how many alerts each name expects (a test wants at least
one).
"""
import math
import re
import sys

import yaml

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
# which series and predicate make each alert fire (the rule's expr, read
# back: max by (labels) (metric) OP threshold)
FIRES = {
    'StrataStragglerConfirmed': ('strata_straggler_confirmed', lambda v: v == 1),
    'StrataGpuMemoryLeak': ('strata_gpu_leak_growth_bytes_per_second', lambda v: v > 0),
    'StrataAgentDown': ('strata_agent_last_batch_timestamp_seconds', lambda v: True),
}
# series on the wall clock, moved onto promtool's (which starts at 0)
WALL_CLOCK = {'strata_agent_last_batch_timestamp_seconds'}


def parse_metrics(text):
    out = []
    for line in text.splitlines():
        if not line or line.startswith('#'):
            continue
        m = SAMPLE.match(line)
        if not m:
            sys.exit('unparsable /metrics line: %r' % line)
        labels = dict(LABEL.findall(m.group(2) or ''))
        out.append((m.group(1), labels, float(m.group(3)), line.rsplit(' ', 1)[0]))
    return out


def humanize1024(v):
    """Prometheus' humanize1024 template function."""
    if abs(v) <= 1 or math.isnan(v) or math.isinf(v):
        return '%.4g' % v
    prefix = ''
    for p in ('ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei', 'Zi', 'Yi'):
        if abs(v) < 1024:
            break
        prefix, v = p, v / 1024
    return '%.4g%s' % (v, prefix)


def humanize_duration(v):
    """Prometheus' humanizeDuration template function."""
    if v == 0 or math.isnan(v) or math.isinf(v):
        return '%.4gs' % v
    sign, v = ('-', -v) if v < 0 else ('', v)
    if v >= 1:
        s = int(v)
        d, h, m, sec = s // 86400, s // 3600 % 24, s // 60 % 60, s % 60
        if d:
            return '%s%dd %dh %dm %ds' % (sign, d, h, m, sec)
        if h:
            return '%s%dh %dm %ds' % (sign, h, m, sec)
        if m:
            return '%s%dm %ds' % (sign, m, sec)
        return '%s%.4gs' % (sign, v)
    sys.exit('humanizeDuration below 1 s not rendered by this checker')


def render(template, labels, value):
    def sub(m):
        expr = m.group(1).strip()
        if expr.startswith('$labels.'):
            return labels.get(expr[len('$labels.'):], '')
        if expr == '$value | humanize1024':
            return humanize1024(value)
        if expr == '$value | humanizeDuration':
            return humanize_duration(value)
        if expr == '$value':
            return '%g' % value
        sys.exit('template not rendered by this checker: {{ %s }}' % expr)
    return re.sub(r'\{\{(.*?)\}\}', sub, template)


def by_labels(expr):
    m = re.search(r'max by \(([^)]*)\)', expr)
    if not m:
        sys.exit('rule expr not of the form max by (...) (...): %s' % expr)
    return [l.strip() for l in m.group(1).split(',')]


def duration_minutes(d):
    m = re.fullmatch(r'(\d+)([smh])', d or '0s')
    n, unit = int(m.group(1)), m.group(2)
    return n / 60 if unit == 's' else n if unit == 'm' else n * 60


def silence_minutes(expr):
    """StrataAgentDown's `time() - ... > N`: N seconds, in whole minutes."""
    m = re.fullmatch(r'\s*time\(\) - .* > (\d+)\s*', expr)
    if not m:
        sys.exit('rule expr not of the form time() - ... > N: %s' % expr)
    return math.ceil(int(m.group(1)) / 60)


def main():
    samples = parse_metrics(open(sys.argv[1]).read())
    rules_path = sys.argv[2]
    rules = {r['alert']: r for g in yaml.safe_load(open(rules_path))['groups']
             for r in g['rules'] if 'alert' in r}
    newest = max([v for m, _, v, _ in samples if m in WALL_CLOCK] or [0])
    samples = [(m, l, v - newest if m in WALL_CLOCK else v, t) for m, l, v, t in samples]
    series = [{'series': text, 'values': '%s+0x15' % repr(v)} for _, _, v, text in samples]
    tests = []
    for name in sys.argv[3:]:
        rule, (metric, fires) = rules[name], FIRES[name]
        if metric not in rule['expr']:
            sys.exit('%s no longer reads %s' % (name, metric))
        keep = by_labels(rule['expr'])
        at = duration_minutes(rule.get('for')) + 1
        if metric in WALL_CLOCK:  # silent past the bound first, then for `for`
            at += silence_minutes(rule['expr']) + 1
        exp = []
        for m, labels, v, _ in samples:
            if m != metric or not fires(v):
                continue
            lab = {k: labels[k] for k in keep if k in labels}
            lab.update(rule.get('labels', {}))
            value = at * 60 - v if metric in WALL_CLOCK else v  # the expr's value then
            exp.append({'exp_labels': lab,
                        'exp_annotations': {k: render(t, lab, value)
                                            for k, t in rule.get('annotations', {}).items()}})
        print('%s: %d alerts expected' % (name, len(exp)), file=sys.stderr)
        tests.append({'alertname': name,
                      'eval_time': '%dm' % at,
                      'exp_alerts': exp})
    yaml.safe_dump({'rule_files': [rules_path], 'evaluation_interval': '1m',
                    'tests': [{'interval': '1m', 'input_series': series,
                               'alert_rule_test': tests}]}, sys.stdout, sort_keys=False)


if __name__ == '__main__':
    main()
