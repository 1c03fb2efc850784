# strata record -- CMD: the full main->a->b->c chain in >= 90% of the
# workload's samples, and the command's exit code returned.
source "$(dirname "$0")/lib.sh"
require_bpf
set +e
CHAIN_CPU_OUT="$T/cpu" "$STRATA" record -F 199 -o "$T/out.folded" -- "$FIX/chain" 3 7 2> "$T/err"
rc=$?
set -e
cat "$T/err"
[ "$rc" -eq 7 ] || fail "exit code $rc, want the command's 7"
head -5 "$T/out.folded"
total=$(folded_sum "$T/out.folded" chain "")
full=$(folded_sum "$T/out.folded" chain ';main;a;b;c(;|$)')
assert_ratio "$full" "$total" 90 "main;a;b;c chain"
# Every CPU-second the chain got is ~199 samples: most of them must be
# there, and no more than there were (on an idle machine: 3 s, ~597).
cpu=$(cat "$T/cpu")
read -r lo hi < <(python3 -c "print(int(0.75 * $cpu * 199), int(1.1 * $cpu * 199) + 5)")
[ "$total" -ge "$lo" ] && [ "$total" -le "$hi" ] ||
	fail "$total samples for $cpu CPU-s at 199 Hz, want $lo..$hi"
echo "ok: $total samples for $cpu CPU-seconds"
# c is the hottest frame: it must resolve to its source file and line.
"$STRATA" record -F 99 -o "$T/out.json" -- "$FIX/chain" 1
python3 - "$T/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
cs = [f for f in d["frames"] if f.get("func") == "c"]
assert cs, "no frame named c"
assert any((f.get("file") or "").endswith("chain.c") and f.get("line", 0) > 0 for f in cs), cs
print("ok: c resolved to", cs[0].get("file"), cs[0].get("line"))
PY
