#!/usr/bin/env bash
# Framework-level GPU memory: PyTorch's caching allocator hands tensors
# blocks of segments it got from cudaMalloc once, so a tensor leak never
# shows at cudaMalloc.  Its USDT probes (pytorch:malloc/free, with
# semaphores) give the tensors, tracked apart from the driver's segments.
# A Python loop over the allocator stand-in (libc10_cuda.so, real
# sys/sdt.h probes) keeps one 256 KiB activation per step (40 steps): the
# framework section of --leaks has 40 x 256 KiB at the leaking Python
# line, while the driver section has the one 64 MiB segment.  The same loop
# without the leak (alloc/free balanced): no framework allocation left.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
require_bpf
export SIM_INIT_MS=300 # the context creation; the unwind tables load meanwhile
line=$(py_marker_line "$PYFIX/py_tensors.py" LEAK_LINE)
LIBS=(--gpu-lib "$FIX/libcudart.so" --gpu-lib "$FIX/libcuda.so" --gpu-lib "$FIX/libc10_cuda.so")
py=python3

run() { # mode -> $T/leaks.<mode>.txt
	"$STRATA" record -v "${LIBS[@]}" --drain-interval 100 -o "$T/p.folded" \
		--leaks "$T/leaks.$1.txt" -- "$py" "$PYFIX/py_tensors.py" "$FIX/libc10_cuda.so" \
		"$1" 40 > "$T/out.$1" 2>&1 || { cat "$T/out.$1"; fail "$1: strata record failed"; }
	grep -q 'segments 1 ' "$T/out.$1" || fail "$1: the allocator used more than one segment"
	grep -E 'libc10_cuda.so: .* 2 framework USDT probes' "$T/out.$1" ||
		fail "$1: pytorch:malloc/free not found in libc10_cuda.so"
	cat "$T/leaks.$1.txt"
}
section() { # file, driver|framework -> that section's rows
	awk -v want="$2" '/^# strata GPU allocations/ { s = "driver"; next }
		/^# strata framework allocations/ { s = "framework"; next }
		/^ +bytes / || /^$/ { next }
		s == want' "$1"
}

run leak
top=$(section "$T/leaks.leak.txt" framework | head -1)
echo "$top" | awk '{ exit !($1 == 40 * 262144 && $2 == 40) }' ||
	fail "leak: want 40 x 256 KiB framework allocations outstanding: $top"
echo "$top" | grep -Eq "c10_cuda_alloc <- .* <- Tensor.__init__ \(py_tensors\.py:[0-9]+\)( <- [^()]+)* <- remember \(py_tensors\.py:$line\)( <- [^()]+)* <- train_step \(py_tensors\.py:[0-9]+\)" ||
	fail "leak: the framework leak is not at remember (py_tensors.py:$line): $top"
seg=$(section "$T/leaks.leak.txt" driver)
[ "$(echo "$seg" | wc -l)" -eq 1 ] && echo "$seg" | awk '{ exit !($1 == 64 * 1048576 && $2 == 1) }' ||
	fail "leak: the driver level should hold the one 64 MiB segment: $seg"
grep -Eq 'fw_events=[1-9]' "$T/out.leak" || fail "leak: no framework events counted"
echo "ok: leak: 40 tensors (10 MiB) at py_tensors.py:$line, the driver level flat (1 segment)"

run churn
[ -z "$(section "$T/leaks.churn.txt" framework)" ] ||
	fail "churn: framework allocations reported for a balanced loop"
echo "ok: churn: no framework allocation outstanding (the segment alone at the driver level)"
