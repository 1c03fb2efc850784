# PyTorch CPU training loop (Linear + ReLU + backward + SGD, Debian's
# python3-torch): Python frames lead down into libtorch's native frames:
# train_step -> Module._call_impl -> Linear.forward -> at::... (forward),
# and train_step -> Tensor.backward -> torch::autograd (backward).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
require_bpf
py=/usr/bin/python3.11
[ -x "$py" ] || skip "no $py"
"$py" -c 'import torch' 2> /dev/null || skip "torch does not import in $py"
out=$T/torch.folded
"$STRATA" record -v -F 199 -o "$out" -- "$py" "$PYFIX/py_torch.py" 4 2> "$T/err"
grep -E '^  python' "$T/err" || true
steps=$(folded_sum "$out" "" ';train_step \(py_torch\.py:[0-9]+\)')
fwd=$(folded_sum "$out" "" \
	';train_step \(py_torch\.py:[0-9]+\);([^;]*;)*Linear\.forward \(linear\.py:[0-9]+\);([^;]*;)*at::')
bwd=$(folded_sum "$out" "" \
	';train_step \(py_torch\.py:[0-9]+\);([^;]*;)*Tensor\.backward \(_tensor\.py:[0-9]+\);([^;]*;)*torch::autograd::')
echo "train_step samples: $steps, forward into at::: $fwd, backward into torch::autograd: $bwd"
# The loop runs ~3 of the 4 s (import takes the rest).
[ "$steps" -ge 200 ] || fail "only $steps samples in train_step"
assert_ratio "$fwd" "$steps" 10 "Linear.forward down into at:: frames"
assert_ratio "$bwd" "$steps" 10 "Tensor.backward down into torch::autograd frames"
