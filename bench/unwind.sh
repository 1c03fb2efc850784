#!/usr/bin/env bash
# Frame accuracy and BPF cost per sample, frame pointers only vs hybrid
# (CFI tables + FP), measured side by side on the same workloads:
#   - nofp_chain: exe + 2 libraries built -O2 -fomit-frame-pointer; correct =
#     the stack holds main;exe_outer;a_mid;b_leaf and reaches _start
#   - qsort_cb: comparator called by Debian's libc; correct = reaches
#     _start through main;sort_rounds
#   - python3: a pure-Python loop in /usr/bin/python3 (no frame pointers);
#     complete = the stack reaches _start (no reference chain to check)
#   - pytorch: a CPU training loop (Linear + ReLU + backward + SGD) in
#     Debian's python3-torch, when installed; complete = reaches _start
#     (or clone3, for worker threads)
# BPF ns/sample from kernel.bpf_stats_enabled.  Prints a markdown table.
#   bench/unwind.sh [SECONDS per run, default 3]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-3}
T=$(mktemp -d /tmp/strata-bench-unwind.XXXXXX)
trap 'rm -rf "$T"; sysctl -qw kernel.bpf_stats_enabled=0 2>/dev/null || true' EXIT
[ "$(id -u)" -eq 0 ] || { echo "bench: needs root"; exit 1; }
sysctl -qw kernel.bpf_stats_enabled=1
PY="import time
def inner(n):
    s = 0
    for i in range(n): s += i * i
    return s
def middle(): return inner(200000)
def outer(t):
    while time.time() < t: middle()
outer(time.time() + $SECS)"
TORCH="import time, torch
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(256, 512), torch.randint(0, 10, (256,))
t = time.time() + $SECS + 3
while time.time() < t:
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()"
have_torch=0
/usr/bin/python3.11 -c 'import torch' 2>/dev/null && have_torch=1

# fraction(file, comm, regex): samples of comm matching regex / all of comm.
fraction() {
	awk -v comm="$2" -v re="$3" '{ n = $NF; sub(/ [0-9]+$/, ""); split($0, f, ";");
		if (f[1] != comm) next; all += n; if ($0 ~ re) ok += n }
		END { printf "%d %d\n", ok, all }' "$1"
}

run() { # mode name comm regex cmd...
	local mode=$1 name=$2 comm=$3 re=$4; shift 4
	build/strata record --unwind "$mode" -F 499 -o "$T/out.folded" -- "$@" > /dev/null 2>&1 &
	local rec=$!
	sleep $((SECS - 1))
	local prog
	prog=$(bpftool prog show name profile_sample 2>/dev/null | awk 'NR == 1')
	wait "$rec"
	local t c
	t=$(sed -n 's/.*run_time_ns \([0-9]*\) .*/\1/p' <<<"$prog")
	c=$(sed -n 's/.*run_cnt \([0-9]*\).*/\1/p' <<<"$prog")
	read -r ok all < <(fraction "$T/out.folded" "$comm" "$re")
	printf '| %s | %s | %d / %d | %.1f%% | %s |\n' "$name" "$mode" "$ok" "$all" \
		"$(awk -v a="$ok" -v b="$all" 'BEGIN { print b ? 100 * a / b : 0 }')" \
		"$(awk -v t="${t:-0}" -v c="${c:-0}" 'BEGIN { print c ? int(t / c) : "-" }')"
}

echo "| workload | unwinder | correct samples | accuracy | BPF ns/sample |"
echo "|---|---|---|---|---|"
for mode in fp hybrid; do
	run $mode nofp_chain nofp_chain '^nofp_chain;_start;.*;main;exe_outer;a_mid;b_leaf(;|$)' build/fixtures/nofp_chain "$SECS"
	run $mode qsort_cb qsort_cb '^qsort_cb;_start;.*;main;sort_rounds;' build/fixtures/qsort_cb "$SECS"
	run $mode "python3 loop" python3 '^python3;_start;' python3 -c "$PY"
	[ "$have_torch" = 1 ] && run $mode "pytorch train loop" python3.11 '^python3.11;(_start|clone3|__clone3|clone);' /usr/bin/python3.11 -c "$TORCH"
done
[ "$have_torch" = 1 ] || echo "(python3-torch not installed: no pytorch rows)"

# Steady state, as an always-on agent sees a long training job: the agent
# (host-wide, 3 s profiles) watches the training loop for 12 s; the first
# profile holds the warm-up (import torch: ~300 libraries, 0.5 s of table
# builds), the later ones the steady state.
if [ "$have_torch" = 1 ]; then
	mkdir "$T/agent"
	/usr/bin/python3.11 -c "${TORCH/+ 3/+ 10}" &
	py=$!
	build/strata-agent --output "$T/agent" --period 3 --format folded & ag=$!
	sleep 12.5
	kill -INT "$ag"; wait "$ag" || true
	wait "$py" || true
	echo
	echo "| pytorch under strata-agent (hybrid) | complete samples | accuracy |"
	echo "|---|---|---|"
	n=0
	for f in "$T"/agent/*.folded; do
		n=$((n + 1))
		read -r ok all < <(fraction "$f" python3.11 '^python3.11;(_start|clone3|__clone3|clone);')
		[ "$all" -gt 0 ] || continue
		label="profile $n"; [ $n = 1 ] && label="profile 1 (warm-up)"
		printf '| %s | %d / %d | %.1f%% |\n' "$label" "$ok" "$all" \
			"$(awk -v a="$ok" -v b="$all" 'BEGIN { print 100 * a / b }')"
	done
fi
