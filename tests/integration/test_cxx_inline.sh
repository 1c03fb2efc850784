# C++ names are demangled and an always_inline function shows as its own
# (inlined) frame above the function it was inlined into, with its file:line.
source "$(dirname "$0")/lib.sh"
require_bpf
"$STRATA" record -F 199 -o "$T/out.json" -- "$FIX/cxxinline" 2
"$STRATA" record -F 199 -o "$T/out.folded" -- "$FIX/cxxinline" 1
head -3 "$T/out.folded"
python3 - "$T/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
fr = d["frames"]
total = sum(s["count"] for s in d["samples"] if s["comm"] == "cxxinline")
def name(i): return fr[i].get("func") or ""
good = 0
for s in d["samples"]:
    if s["comm"] != "cxxinline":
        continue
    names = [name(i) for i in s["frames"]]
    # ... main, run (real frame), hot_kernel (inlined into run) as the leaf.
    if len(names) >= 3 and names[-3] == "main" and \
       names[-2] == "strata::Spinner<int>::run(double)" and \
       names[-1] == "strata::hot_kernel(double, int)" and fr[s["frames"][-1]]["inlined"]:
        good += s["count"]
assert total > 200, f"only {total} samples"
assert good * 100 >= 90 * total, f"{good} of {total} samples with main;run;hot_kernel[inlined]"
hk = [f for f in fr if f.get("func") == "strata::hot_kernel(double, int)"]
# hot_kernel's loop is lines 21-22 of cxxinline.cc.
assert any((f.get("file") or "").endswith("cxxinline.cc") and f["line"] in (21, 22) for f in hk), hk
print(f"ok: {good} of {total} samples end main;Spinner<int>::run;hot_kernel (inlined), line", hk[0]["line"])
PY
grep -q 'strata::hot_kernel(double, int)_\[i\]' "$T/out.folded" || fail "folded lacks the _[i] inline marker"
