# strata-agent --output DIR --period S writes one profile per period, with
# whole-host sampling (the workload is found without being named).
source "$(dirname "$0")/lib.sh"
require_bpf
mkdir "$T/out"
"$FIX/chain" 4 &
w=$!
"$AGENT" --output "$T/out" --period 1 --format folded & a=$!
sleep 3.5
kill -TERM "$a"
wait "$a" || fail "agent exited with $?"
wait "$w"
ls -l "$T/out"
n=$(ls "$T/out" | grep -c '\.folded$' || true)
[ "$n" -ge 2 ] || fail "$n profiles for ~3.5 s at 1 s periods"
chain=$(cat "$T/out"/*.folded | folded_sum /dev/stdin chain ';main;a;b;c(;|$)')
[ "$chain" -gt 50 ] || fail "host-wide agent saw only $chain chain samples"
echo "ok: $n profiles, $chain chain samples"
