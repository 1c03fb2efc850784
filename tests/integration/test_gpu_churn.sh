#!/usr/bin/env bash
# Attach/detach under process churn: 200 short-lived CUDA processes (no
# SIM_INIT_MS: each lives a few ms).
#  A. Discovery by /proc scans only (--no-gpu-preattach): once a process
#     shows the stand-in libraries, their probes stay attached for the
#     grace period and the next processes are admitted in BPF at their
#     first call.  After the grace period strata holds no uprobe link but
#     its dynamic-linker hook.
#  B. The libraries named with --gpu-lib: every process traced from its
#     first call (exact counts).
# Both: no map entries left for the dead processes.
source "$(dirname "$0")/lib.sh"
require_bpf
unset SIM_INIT_MS
cat > "$T/churn.sh" <<EOS
for i in \$(seq 50); do
	for j in 1 2 3 4; do "$FIX/gpu_workload" once & done
	wait
done
sleep 2.5   # > --gpu-grace + a drain
# strata (our parent) may hold no uprobe link: uprobe_multi links (fdinfo)
# and single uprobes (perf events, kernels before 6.6)
n=0
for fd in /proc/\$PPID/fd/*; do
	grep -qs 'link_type:.*uprobe' "/proc/\$PPID/fdinfo/\${fd##*/}" && n=\$((n + 1))
done
if command -v bpftool > /dev/null; then
	n=\$((n + \$(bpftool perf list 2>/dev/null | awk -v p=\$PPID '\$1 == "pid" && \$2 == p && /uprobe/' | wc -l)))
fi
echo \$n > "$T/links_left"
EOS
check_state() { # out-file: no targets, allocations or per-process rows left in BPF
	local line
	line=$(grep 'gpu: links=' "$1") || fail "no gpu state line"
	for kv in targets=0 bpf_targets=0 bpf_allocs=0 bpf_inflight=0 bpf_proc_rows=0; do
		echo "$line" | grep -q " $kv " || fail "after churn: want $kv in: $line"
	done
}

"$STRATA" record -v --no-gpu-preattach --gpu-grace 1000 --drain-interval 100 -o "$T/a.folded" \
	--tally "$T/a.txt" -- bash "$T/churn.sh" > "$T/a.out" 2>&1 ||
	{ tail -20 "$T/a.out"; fail "strata record (A) failed"; }
grep 'gpu' "$T/a.out" | grep -v 'tracing pid' | cut -c1-400
traced=$(sed -n 's/.*gpu: \([0-9]*\) processes traced.*/\1/p' "$T/a.out")
left=$(cat "$T/links_left")
# what stays: the dynamic linkers' hooks (one uprobe per ld.so file, for
# the session: agent/gpu/gpu_files.c hook_dl), no GPU library's probe
dls=$(grep 'gpu: links=' "$T/a.out" | sed -n 's/.* dls=\([0-9]*\) .*/\1/p')
[ "$left" -eq "${dls:-0}" ] ||
	fail "A: $left uprobe links still attached after the grace period (${dls:-0} dynamic-linker hooks)"
grep -q 'libcudart.so: no user for 1000 ms: detached' "$T/a.out" || fail "A: no detach logged"
# the first rounds die before a scan sees the libraries; the rest are
# admitted at their first call (typically 175-185 of 200)
[ "${traced:-0}" -ge 100 ] || fail "A: only $traced of 200 processes traced"
check_state "$T/a.out"
echo "ok: A: $traced of 200 traced by scans + admission, no uprobe link left"

# (no probe budget: the duty cycle would shed launch/alloc/sync probes for
# a while when a window's first processes make their calls in a burst, and
# B counts every call)
"$STRATA" record -v --no-gpu-preattach --gpu-lib "$FIX/libcudart.so" --gpu-lib "$FIX/libcuda.so" \
	--probe-budget 0 --drain-interval 100 -o "$T/b.folded" --tally "$T/b.txt" -- bash "$T/churn.sh" \
	> "$T/b.out" 2>&1 || { tail -20 "$T/b.out"; fail "strata record (B) failed"; }
traced=$(sed -n 's/.*gpu: \([0-9]*\) processes traced.*/\1/p' "$T/b.out")
[ "$traced" -eq 200 ] || fail "B: $traced of 200 processes traced"
for api in cudaMalloc cudaLaunchKernel cudaFree cudaDeviceSynchronize; do
	grep -Eq "^$api +200 " "$T/b.txt" || { cat "$T/b.txt"; fail "B: $api: want 200 calls"; }
done
check_state "$T/b.out"
echo "ok: B: 200 of 200 traced from their first call, exact counts; no map entries left"
