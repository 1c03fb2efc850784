"""Checks a Grafana dashboard's PromQL against a strata-server /metrics
scrape (run by test_grafana_dashboard.sh).

Usage: grafana_check.py DASHBOARD.json METRICS.txt [RULES_OUT.yml]

Every query (panel targets and the templating variables' label_values)
must name only series the scrape has samples of; its label matchers,
by()/without() labels and legend {{labels}} must be labels those series
carry, and a matcher's literal value must occur.  With RULES_OUT, the
queries are also written as recording rules so `promtool check rules`
parses them (Grafana's $variables replaced by what Grafana would send).
Exit 1 with one line per problem.
"""
import json
import re
import sys

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right",
            "and", "or", "unless", "offset", "bool", "inf", "nan"}
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


def scrape(path):
    """{metric: [ {label: value} per sample ]} from a text exposition."""
    series = {}
    for line in open(path):
        if not line.strip() or line.startswith("#"):
            continue
        m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s', line)
        if m:
            labels = {k: v for k, _, v in LABEL.findall(m.group(3) or "")}
            series.setdefault(m.group(1), []).append(labels)
    return series


def queries(dash):
    """(where, expr, legend) for every PromQL the dashboard sends."""
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((f'panel "{p.get("title")}" {t.get("refId")}',
                                t["expr"], t.get("legendFormat", "")))
            walk(p.get("panels", []))
    walk(dash.get("panels", []))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = re.fullmatch(r'\s*label_values\((.*),\s*([a-zA-Z_]\w*)\)\s*', q)
        if not m:
            out.append((f'variable {v["name"]}', q, ""))
            continue
        # label_values(SELECTOR, LABEL): the label must be on the series
        out.append((f'variable {v["name"]}', m.group(1), "{{%s}}" % m.group(2)))
    return out


def grafana_to_promql(expr):
    """What Grafana sends: $__rate_interval a duration, $var a regex."""
    expr = expr.replace("$__rate_interval", "1m").replace("$__interval", "15s")
    return re.sub(r'\$\{?[a-zA-Z_]\w*\}?', ".*", expr)


def check(where, expr, legend, series):
    problems = []
    metrics = {}  # metric -> [(label, op, value)]
    body = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings out of the way
    # selectors with matchers: NAME{...} or a bare {...}
    for m in re.finditer(r'([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{', expr):
        end = expr.index("}", m.end())
        metrics.setdefault(m.group(1), []).extend(LABEL.findall(expr[m.end():end]))
    body = re.sub(r'\{[^}]*\}', " ", body)
    body = re.sub(r'\[[^\]]*\]', " ", body)
    grouping = []
    for g in re.finditer(r'\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)', body):
        grouping += [x.strip() for x in g.group(2).split(",") if x.strip()]
    body = re.sub(r'\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)', " ", body)
    for m in re.finditer(r'([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\()?', body):
        name, call = m.group(1), m.group(2)
        if call or name.lower() in KEYWORDS or re.match(r'\d', name):
            continue
        metrics.setdefault(name, [])
    if None in metrics:
        problems.append(f"{where}: a selector without a metric name: {expr}")
        del metrics[None]
    if not metrics:
        problems.append(f"{where}: names no series: {expr}")
    seen_labels = set()
    for name, matchers in metrics.items():
        samples = series.get(name)
        if not samples:
            problems.append(f"{where}: {name} is not exported (no sample in /metrics)")
            continue
        labels = set().union(*(s.keys() for s in samples))
        seen_labels |= labels
        for label, op, value in matchers:
            if label == "__name__":
                continue
            if label not in labels:
                problems.append(f"{where}: {name} has no label {label}")
            elif op == "=" and "$" not in value and not any(s.get(label) == value for s in samples):
                problems.append(f'{where}: no {name} sample with {label}="{value}"')
    for label in grouping + re.findall(r'\{\{\s*([a-zA-Z_]\w*)\s*\}\}', legend):
        if label not in seen_labels and label not in ("le", "instance", "job"):
            problems.append(f"{where}: label {label} is on none of {sorted(metrics)}")
        if label == "job" and "job" not in seen_labels:
            # Prometheus' own job label would hide a missing strata job label
            problems.append(f"{where}: label job is on none of {sorted(metrics)}")
    return problems


def main():
    dash = json.load(open(sys.argv[1]))
    series = scrape(sys.argv[2])
    qs = queries(dash)
    problems = []
    for where, expr, legend in qs:
        problems += check(where, expr, legend, series)
    if len(sys.argv) > 3:
        with open(sys.argv[3], "w") as f:
            f.write("groups:\n  - name: grafana-dashboard\n    rules:\n")
            for i, (_, expr, _) in enumerate(qs):
                f.write(f"      - record: grafana_query_{i}\n        expr: {json.dumps(grafana_to_promql(expr))}\n")
    for p in problems:
        print(p)
    print(f"{len(qs)} queries, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
