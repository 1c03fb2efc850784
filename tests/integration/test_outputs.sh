# The SVG flamegraph is valid XML with the hot frames; JSON is valid and
# self-consistent.
source "$(dirname "$0")/lib.sh"
require_bpf
"$STRATA" record -F 199 -o "$T/out.svg" -- "$FIX/chain" 1
"$STRATA" record -F 199 -o "$T/out.json" -- "$FIX/chain" 1
grep -q '<svg' "$T/out.svg" || fail "no <svg> element"
grep -q '>c<\|"c"\|>c (' "$T/out.svg" || grep -q 'c (' "$T/out.svg" || fail "frame c not in SVG"
if command -v xmllint >/dev/null; then xmllint --noout "$T/out.svg" || fail "SVG is not valid XML"; fi
python3 - "$T/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["total"] == sum(s["count"] for s in d["samples"]), "total != sum of counts"
for s in d["samples"]:
    assert all(0 <= i < len(d["frames"]) for i in s["frames"]), "bad frame index"
print("ok: json", d["total"], "samples", len(d["frames"]), "frames")
PY
