# Draining the double-buffered maps every 5 ms while 999 Hz samples land on
# both CPUs loses nothing and counts nothing twice: the profile's total equals
# the number of samples the BPF program recorded, exactly.
source "$(dirname "$0")/lib.sh"
require_bpf
"$STRATA" record -v -F 999 --drain-interval 5 -o "$T/out.folded" -- \
	sh -c "$FIX/chain 3 & $FIX/syscalls 3; wait" 2> "$T/err"
cat "$T/err" | grep -E 'samples in profile|bpf\.|drains' || true
in_profile=$(sed -n 's/^strata: \([0-9]*\) samples in profile.*/\1/p' "$T/err")
recorded=$(sed -n 's/^ *bpf\.recorded=\([0-9]*\)$/\1/p' "$T/err")
full=$(sed -n 's/^ *bpf\.counts_map_full=\([0-9]*\)$/\1/p' "$T/err")
drains=$(sed -n 's/^ *drains=\([0-9]*\) .*/\1/p' "$T/err")
in_file=$(folded_sum "$T/out.folded" "" "")
[ -n "$recorded" ] && [ -n "$in_profile" ] || fail "counters missing from -v output"
[ "$drains" -ge 200 ] || fail "only $drains drains: the race was not exercised"
# Exactness is the point; the volume only has to exercise the race (the
# machine may be shared: other processes' samples are filtered, not ours).
[ "$recorded" -ge 1000 ] || fail "only $recorded samples recorded"
[ "$full" -eq 0 ] || fail "$full samples dropped on a full map"
[ "$in_profile" -eq "$recorded" ] || fail "profile has $in_profile samples, BPF recorded $recorded"
[ "$in_file" -eq "$recorded" ] || fail "output file has $in_file samples, BPF recorded $recorded"
echo "ok: $recorded recorded = $in_profile in profile = $in_file in file, over $drains drains"
