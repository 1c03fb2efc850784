#!/usr/bin/env bash
# The real CUDA runtime (libcudart.so.13) and NCCL (libnccl.so.2) from
# /usr/local/cuda: a program calling cudaMalloc, cudaLaunchKernel,
# ncclCommInitRank and ncclAllReduce (no GPU or driver here: they fail
# fast).  strata finds the libraries itself (pre-attach from the ld.so
# cache / the toolkit directory; probes by versioned symbols such as
# cudaMalloc@@libcudart.so.13 and NCCL's weak aliases), and the tally has
# every call with the return code the library itself reported, by name.
source "$(dirname "$0")/lib.sh"
require_bpf
CUDA=/usr/local/cuda
[ -e "$CUDA/lib64/libcudart.so.13" ] && [ -e "$CUDA/include/nccl.h" ] ||
	skip "no CUDA 13 toolkit with NCCL in $CUDA"
ls "$CUDA"/lib64/libnccl.so.2* > /dev/null 2>&1 || skip "no libnccl.so.2 in $CUDA/lib64"
cc -O1 -g -fno-omit-frame-pointer -o "$T/real" "$ROOT/tests/integration/gpu_real_libs.c" \
	-I"$CUDA/include" -L"$CUDA/lib64" -l:libcudart.so.13 -l:libnccl.so.2 \
	-Wl,-rpath,"$CUDA/lib64" || fail "cannot build against $CUDA"
"$STRATA" record -v --tally "$T/tally.txt" -o "$T/p.folded" -- "$T/real" > "$T/out" 2> "$T/err" ||
	{ cat "$T/out" "$T/err"; fail "strata record failed"; }
cat "$T/out" "$T/tally.txt"
grep -E 'libcudart.so.13: [0-9]+ CUDA/NCCL entry points' "$T/err" || fail "libcudart.so.13 not attached"
grep -E 'libnccl.so.2: [0-9]+ CUDA/NCCL entry points' "$T/err" || fail "libnccl.so.2 not attached"
python3 - "$T/out" "$T/tally.txt" "$CUDA/include/nccl.h" <<'PY' || fail "tally vs the libraries' own return codes"
import re, sys
said = [l.split(None, 2) for l in open(sys.argv[1]) if l.strip()]
tally = open(sys.argv[2]).read()
enum = re.search(r"typedef enum \{([^}]*)\} ncclResult_t;", open(sys.argv[3]).read()).group(1)
nccl = {int(v): k for k, v in re.findall(r"(nccl\w+)\s*=\s*(\d+)", enum)}
want = {"cudaMalloc", "cudaLaunchKernel", "ncclCommInitRank", "ncclAllReduce"}
failed = 0
for api, code, name in said:
    if api not in want:
        continue
    want.discard(api)
    code = int(code)
    name = nccl[code] if api.startswith("nccl") else name.strip()
    calls = re.search(r"^%s +(\d+) .* (\d+)$" % api, tally, re.M)
    assert calls and calls.group(1) == "1", (api, "calls")
    assert calls.group(2) == ("1" if code else "0"), (api, "errors")
    if code:
        assert re.search(r"^%s +%s +1$" % (api, name), tally, re.M), (api, name)
        failed += 1
    print("ok:", api, code, name)
assert not want, want
assert failed >= 3, "the calls were expected to fail here (no driver)"
PY
echo "ok: real libcudart.so.13 + libnccl.so.2: calls and return codes by name"
