#!/usr/bin/env bash
# GPU call-site stacks carry the Python frames of the calling thread: a
# Python program (PyTorch-like, through ctypes) leaks cudaMalloc memory
# from main -> training_step -> leaky_alloc; the leak's stack reads
# Python -> native (ctypes, libffi) -> cudaMalloc, with leaky_alloc at its
# line.  Every CPython here (Debian 3.11, pyenv 3.10-3.13).  Drains every
# 100 ms and a program that lives on after its calls: Python code objects
# are read from the live process.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
require_bpf
# Creating a CUDA context takes 100+ ms (the stand-in's first call takes as
# long here): strata loads the unwind tables meanwhile.
export SIM_INIT_MS=300
line=$(py_marker_line "$PYFIX/py_cuda.py" LEAK_LINE)
ran=0
for py in $(py_interpreters); do
	ran=$((ran + 1))
	"$STRATA" record -v --drain-interval 100 --gpu-lib "$FIX/libcudart.so" --gpu-lib "$FIX/libcuda.so" \
		--leaks "$T/leaks-$ran.txt" -o "$T/p.folded" -- "$py" "$PYFIX/py_cuda.py" \
		"$FIX/libcudart.so" 10 > "$T/out" 2>&1 || { cat "$T/out"; fail "$py: record failed"; }
	top=$(awk 'NR == 3' "$T/leaks-$ran.txt")
	echo "$py: $top"
	echo "$top" | awk '{ exit !($1 == 10 * 1048576 && $2 == 10) }' ||
		fail "$py: want 10 MiB in 10 allocations outstanding"
	# allocation site first: cudaMalloc, the native frames (libffi,
	# ctypes), then the Python callers in order, each where its
	# interpreter frame was (3.10 keeps native eval frames between them)
	py_frame() { echo "$1 \\(py_cuda\\.py:${2:-[0-9]+}\\)"; }
	between='( <- [^()]+)*'
	echo "$top" | grep -Eq "cudaMalloc <- libffi[^ ]* <- .*$(py_frame leaky_alloc "$line")$between <- $(py_frame training_step)$between <- $(py_frame main)$between <- $(py_frame '<module>')" ||
		fail "$py: leak stack is not Python -> ctypes/libffi -> cudaMalloc"
done
[ "$ran" -gt 0 ] || skip "no CPython 3.10-3.13 here"
echo "ok: $ran interpreters: leak stacks read Python -> ctypes -> cudaMalloc"
