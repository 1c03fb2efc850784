#!/usr/bin/env bash
# A GPU target that exec()s another GPU program under the same pid (a
# launcher that made CUDA calls, then exec'd the training script): the new
# image's state in BPF must survive the old image's end.  Every BPF entry
# is keyed by pid; the old image was finished three drains after its exec
# by deleting every entry of the pid, and the new image's allocations (its
# communicators, call sites, target entry) went with them: the leak report
# of `gpu_workload exec gpu_workload leak 25` had 0 allocations.  Now the
# old image's own allocations and calls go; the new image's 25 stay, and
# the old image's other rows are purged when the new image ends, also when
# it never calls CUDA.
source "$(dirname "$0")/lib.sh"
require_bpf
# No context-creation delay: the new image allocates within milliseconds
# of its exec, long before the old image is finished; it lingers 1.5 s
# (15 drains) so the leak report comes after that.
export SIM_INIT_MS=0 SIM_LINGER_MS=1500
"$STRATA" record -v --gpu-lib "$FIX/libcudart.so" --gpu-lib "$FIX/libcuda.so" \
	--gpu-lib "$FIX/libnccl.so" --probe-budget 0 --drain-interval 100 -o "$T/p.folded" \
	--leaks "$T/leaks.txt" --tally "$T/tally.txt" \
	-- "$FIX/gpu_workload" exec "$FIX/gpu_workload" leak 25 > "$T/out" 2>&1 ||
	{ cat "$T/out"; fail "strata record failed"; }
cat "$T/leaks.txt"
grep -E '^  gpu: links' "$T/out"
deferred=$(grep -o 'purges_deferred=[0-9]*' "$T/out" | cut -d= -f2)
[ "${deferred:-0}" -ge 1 ] || fail "the exec'd image was not seen finished with its pid live again"
# leaky_site's allocations, on one stack or more: the first ones may be
# walked before the new image's tables are in (shorter stacks)
read -r bytes count < <(awk '/ cudaMalloc <- leaky_site/ { b += $1; n += $2 } END { print b + 0, n + 0 }' \
	"$T/leaks.txt")
[ "$bytes" -eq $((25 << 20)) ] && [ "$count" -eq 25 ] ||
	fail "the new image's leak: $count allocations, $bytes bytes; want 25, $((25 << 20))"
grep -Eq '^cudaMalloc +51 ' "$T/tally.txt" || { cat "$T/tally.txt"; fail "cudaMalloc calls != 51"; }
echo "ok: after exec, the new image's 25 leaked allocations ($bytes bytes) kept; $deferred purge deferred"

# Exec'd into a program that never calls CUDA: the old image's remaining
# rows (call sites, tally) are that image's to purge when it exits; none
# stays in BPF for good (a month of launchers exec'ing would fill the maps).
"$STRATA" record -v --gpu-lib "$FIX/libcudart.so" --gpu-lib "$FIX/libcuda.so" \
	--gpu-lib "$FIX/libnccl.so" --probe-budget 0 --drain-interval 100 -o "$T/p.folded" \
	-- sh -c "'$FIX/gpu_workload' exec /bin/sleep 1; sleep 1.5" > "$T/out" 2>&1 ||
	{ cat "$T/out"; fail "strata record (exec into sleep) failed"; }
line=$(grep -E '^  gpu: links' "$T/out")
echo "$line"
echo "$line" | grep -Eq ' purges_deferred=1( |$)' || fail "the exec into sleep was not seen: $line"
echo "$line" | grep -q ' bpf_proc_rows=0 ' || fail "rows of the exec'd image left in BPF: $line"
echo "ok: exec'd into a program without CUDA: its earlier image's rows purged at its exit"
