#!/usr/bin/env bash
# Python frames: BPF cost per sample with CPython walking vs
# without (kernel.bpf_stats_enabled), and frame accuracy against the
# interpreter's own view (sys._current_frames(), dumped by the workload in
# inner): the share of the workload's samples whose Python frames (name
# and file, root first) equal that view.  Every CPython 3.10-3.13 here.
#   bench/python.sh [SECONDS]   (root; run `make all` first)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/tests/integration/python_lib.sh"
secs=${1:-8}
[ "$secs" -ge 5 ] || { echo "bench/python.sh: SECONDS >= 5" >&2; exit 2; }
STRATA=$ROOT/build/strata
T=$(mktemp -d /tmp/strata-pybench.XXXXXX)
trap 'rm -rf "$T"; sysctl -qw kernel.bpf_stats_enabled="$old_stats"' EXIT
old_stats=$(sysctl -n kernel.bpf_stats_enabled)
sysctl -qw kernel.bpf_stats_enabled=1

# run_time_ns and run_cnt of the sampler program while it is loaded.
prog_stats() {
	bpftool prog show name profile_sample -j 2> /dev/null |
		python3 -c 'import json,sys; p=json.load(sys.stdin); p=p[0] if isinstance(p,list) else p; print(p.get("run_time_ns",0), p.get("run_cnt",0))'
}

# One run: prints "ns_per_invocation invocations recorded".
measure() {
	local py=$1 flag=$2 out=$3
	"$STRATA" record -v -F 999 $flag -o "$out" -- "$py" "$PYFIX/py_chain.py" "$secs" 2> "$T/err" &
	local pid=$! rt0 cnt0 rt cnt rec
	# Steady state only: the window from 2 s in (interpreter started,
	# unwind tables loaded) to 1 s before the end.
	sleep 2
	read -r rt0 cnt0 < <(prog_stats)
	sleep $((secs - 3))
	read -r rt cnt < <(prog_stats)
	wait "$pid"
	rec=$(sed -n 's/^  bpf.recorded=//p' "$T/err")
	# Recorded samples in the window, pro rata (the workload is steady).
	echo "$((rt - rt0)) $((cnt - cnt0)) $((rec * (secs - 3) / secs))"
}

printf '%-44s %10s %10s %12s %9s\n' interpreter "ns/sample" "ns/sample" "walk ns per" accuracy
printf '%-44s %10s %10s %12s %9s\n' "" "no-python" "python" "py sample" "(frames)"
for py in $(py_interpreters); do
	read -r rt0 cnt0 rec0 < <(measure "$py" --no-python "$T/nopy.folded")
	STRATA_PY_VIEW=$T/view measure "$py" "" "$T/py.folded" > "$T/m"
	read -r rt1 cnt1 rec1 < "$T/m"
	view=$(paste -sd';' "$T/view")
	total=$(awk '{s+=$NF} END{print s+0}' "$T/py.folded")
	# Lines differ per sample; compare names and files only.
	exact=$(awk '{ n=$NF; sub(/ [0-9]+$/, ""); k=split($0,f,";"); s="";
		for (i=2;i<=k;i++) if (f[i] ~ /\(.*\.py:[0-9]+\)$/) { g=f[i]; sub(/:[0-9]+\)$/, ")", g); s = s (s==""?"":";") g }
		if (s == v) c += n } END { print c+0 }' v="$view" "$T/py.folded")
	python3 - "$py" "$rt0" "$cnt0" "$rec0" "$rt1" "$cnt1" "$rec1" "$exact" "$total" <<'PY'
import sys
py, rt0, c0, r0, rt1, c1, r1, ex, tot = sys.argv[1], *map(int, sys.argv[2:])
a, b = rt0 / max(c0, 1), rt1 / max(c1, 1)
# Idle and other-CPU invocations cost the same in both runs: the
# difference, spread over the Python run's recorded samples, is the walk.
walk = (b - a) * c1 / max(r1, 1)
print(f"{py:44s} {a:10.0f} {b:10.0f} {walk:12.0f} {100*ex/max(tot,1):8.1f}%")
PY
done
echo "(ns/sample: mean over all invocations of the perf_event program, idle CPUs included;"
echo " accuracy: samples whose Python frames equal the interpreter's own view, of all samples)"
