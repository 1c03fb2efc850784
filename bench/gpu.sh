#!/usr/bin/env bash
# Cost of the GPU layer's probes, on the stand-in CUDA/NCCL libraries.
#  1. Per call of each probed kind (launch, malloc+free, memcpy, stream
#     sync, 1-rank allreduce; gpu_workload calls N), modes alternating run
#     by run in one session: no profiler; the floor (the empty program on
#     the same entry and return points: what the kernel's uprobe +
#     uretprobe round trips cost by themselves); strata without call-site
#     stacks; strata in full (call-site stacks on: the hybrid walker, the
#     per-thread site cache).  The calls are made DEPTH (default 30) frames
#     down a stack built without frame pointers, so a walk has ~DEPTH + 5
#     frames.  Prints ns/call (median of RUNS), the probe cost above no
#     profiler, and full vs floor; launch_alt launches from two sites in
#     turn (each site's walk cached apart: keyed by thread and call site).
#  2. Throughput of a launch-heavy loop (gpu_workload loop) with the probe
#     budget off (unlimited) and on (default 1% of a CPU): launches/s and
#     the sampling ratio strata reports (the duty cycle engaging).
#   bench/gpu.sh [RUNS (default 5)] [CALLS (default 20000)] [LOOP (default 3000000)]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
CALLS=${2:-20000}
LOOP=${3:-3000000}
export DEPTH=${DEPTH:-30}
T=$(mktemp -d /tmp/strata-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
[ "$(id -u)" -eq 0 ] || { echo "bench: needs root"; exit 1; }
FIX=build/fixtures
LIBS=(--no-gpu-preattach --gpu-lib "$FIX/libcudart.so" --gpu-lib "$FIX/libcuda.so"
	--gpu-lib "$FIX/libnccl.so")
export SIM_KERNEL_US=0 SIM_NCCL_LAT_US=0 SIM_COPY_GBPS=1000

calls() { # mode -> "kind ns" lines
	case $1 in
	off) "$FIX/gpu_workload" calls "$CALLS" ;;
	*) build/strata record "${LIBS[@]}" --probe-budget 0 --gpu-probe-mode "$1" -F 1 \
		-o "$T/c.folded" -- "$FIX/gpu_workload" calls "$CALLS" 2>/dev/null ;;
	esac
}
modes=(off empty nostack full)
for ((r = 0; r < RUNS; r++)); do
	for m in "${modes[@]}"; do
		calls "$m" | sed "s/^/$m /" >> "$T/calls"
	done
done
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
med() { awk -v m="$1" -v k="$2" '$1 == m && $2 == k { print $3 }' "$T/calls" | median; }
echo "per call (ns, median of $RUNS runs of $CALLS calls, DEPTH=$DEPTH; probe = above no profiler)"
echo "| call | off | floor (empty entry+return) | nostack | full | full probe | floor probe | full/floor |"
echo "|---|---|---|---|---|---|---|---|"
for k in launch launch_alt malloc_free memcpy sync allreduce; do
	o=$(med off $k) e=$(med empty $k) n=$(med nostack $k) f=$(med full $k)
	awk -v k="$k" -v o="$o" -v e="$e" -v n="$n" -v f="$f" 'BEGIN {
		printf "| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.2fx |\n",
			k, o, e, n, f, f - o, e - o, ((e - o) > 0 ? (f - o) / (e - o) : 0) }'
done
echo "(launch_alt: two launch sites in turn, each one's walk cached; malloc_free is"
echo " two probed calls per iteration; allreduce includes the stand-in's futex"
echo " barrier, so its difference is noisy)"

echo
# 1b. The programs' own time per call (the kernel's run-time statistics,
# STRATA_BPF_STATS=1: strata -v prints them), which the per-call times
# above bury under the uprobe trap: on this VM the stand-ins' -O2 entry
# instructions (sub, test: not emulated by the kernel) are single-stepped
# out of line, a 20-40 us trap with +-10 us of noise.
echo "BPF time per launch (ns per program run, DEPTH=$DEPTH, $CALLS calls, median of $RUNS)"
echo "| mode | call | entry program | return program | stacks reused |"
echo "|---|---|---|---|---|"
for m in nostack full; do
	for k in launch launch_alt; do
		for ((r = 0; r < RUNS; r++)); do
			STRATA_BPF_STATS=1 ONLY=$k build/strata record -v "${LIBS[@]}" --probe-budget 0 \
				--gpu-probe-mode "$m" -F 1 -o "$T/s.folded" -- "$FIX/gpu_workload" calls \
				"$CALLS" 2>&1 > /dev/null | awk '
				/gpu.bpf_stats:/ { for (i = 1; i <= NF; i++) {
					if ($i ~ /^gpu_enter(_multi)?=/) { split($(i + 1), a, ","); e = a[2] }
					if ($i ~ /^gpu_exit(_multi)?=/) { split($(i + 1), a, ","); x = a[2] } } }
				{ if (match($0, /stacks_reused=[0-9]+/)) s = substr($0, RSTART + 14, RLENGTH - 14) }
				END { gsub(/ns/, "", e); gsub(/ns/, "", x); print e, x, s }'
		done > "$T/bpf"
		e=$(awk '{ print $1 }' "$T/bpf" | median) x=$(awk '{ print $2 }' "$T/bpf" | median)
		u=$(awk '{ print $3 }' "$T/bpf" | median)
		echo "| $m | $k | $e | $x | $u of $CALLS |"
	done
done
echo "(launch: one site, the stack reused once its slots are checked; launch_alt:"
echo " two sites in turn, each site's walk of ~DEPTH + 6 frames cached apart)"

echo
# each launch spins 1 us of CPU (SIM_LAUNCH_US), as a framework's launch
# path does: ~1M launches/s, where unlimited probes would take most of a CPU
export SIM_LAUNCH_US=1
echo "launch-heavy loop ($LOOP launches, 1 us of CPU each): budget off vs on"
echo "| mode | ns/launch | launches/s | reported sampling | toggles |"
echo "|---|---|---|---|---|"
loop() { # name, strata args... ("" = no profiler)
	local name=$1 ns ratio="-" toggles="-"
	shift
	if [ "$#" -eq 0 ]; then
		ns=$("$FIX/gpu_workload" loop "$LOOP" | awk '{ print $2 }')
	else
		build/strata record "${LIBS[@]}" "$@" -F 1 -o "$T/l.folded" \
			-- "$FIX/gpu_workload" loop "$LOOP" > "$T/l.out" 2> "$T/l.err"
		ns=$(awk '{ print $2 }' "$T/l.out")
		ratio=$(sed -n 's/.*sampled \([0-9.]*%\) of the time.*/\1/p' "$T/l.err")
		toggles=$(sed -n 's/.*, \([0-9]*\) toggles).*/\1/p' "$T/l.err")
	fi
	awk -v n="$name" -v ns="$ns" -v r="$ratio" -v t="$toggles" 'BEGIN {
		printf "| %s | %.0f | %.0f | %s | %s |\n", n, ns, 1e9 / ns, r, t }'
}
loop "no profiler"
loop "budget off (--probe-budget 0)" --probe-budget 0 --drain-interval 250
loop "budget on (--probe-budget 1, the default)" --probe-budget 1 --drain-interval 250
