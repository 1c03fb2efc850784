# Code objects freed before the drain (module bodies run once at import):
# each of 3 exec'd module bodies is hot in its spin() for 0.4 s and freed
# right after, its memory reused by the next body and by other code.
# Their frames are symbolized when BPF first sees them (PROC_EV_PY_STACK),
# and a reused address fails the identity check (the file is part of it):
# >= 90% of the bodies' samples show
# "<module> (hotmod_N.py:7);spin (hotmod_N.py:5|6)" with their own N.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
require_bpf
py=/usr/bin/python3.11
[ -x "$py" ] || skip "no $py"
out=$T/mod.folded
"$STRATA" record -v -F 199 -o "$out" -- "$py" "$PYFIX/py_modbody.py" 3 2> "$T/err"
grep -E '^  python' "$T/err" || true
# Samples taken while a body ran (under the exec line of py_modbody.py),
# and those that name both its frames with their own file.
line=$(py_marker_line "$PYFIX/py_modbody.py" EXEC_LINE)
inexec=$(folded_sum "$out" "" ";<module> \(py_modbody\.py:$line\);")
both=0
for n in 0 1 2; do
	c=$(py_frames_sum "$out" "<module> \(hotmod_$n\.py:7\);spin \(hotmod_$n\.py:[56]\)\$")
	both=$((both + c))
done
echo "samples in the exec'd bodies: $inexec, with <module> and spin of the same file: $both"
[ "$inexec" -ge 100 ] || fail "only $inexec samples in the exec'd bodies"
# Before: ~40% of them named another body's file (same first line, same
# interned name "<module>") or garbage read from reused memory.
assert_ratio "$both" "$inexec" 90 "freed module bodies named right"
