# strata record -- CMD: -d shorter than the command writes the profile on
# time and still returns the command's exit code; TERM sent to strata by
# another process reaches the command, whose status strata returns.
source "$(dirname "$0")/lib.sh"
require_bpf
set +e
start=$(date +%s%N)
CHAIN_CPU_OUT="$T/cpu" "$STRATA" record -F 99 -d 1 -o "$T/d.folded" -- "$FIX/chain" 3 5 2> "$T/err" &
rec=$!
# Written while the command (3 s) still runs: how long strata takes to
# load its programs on a busy machine is not what this checks.
for _ in $(seq 300); do
	[ -s "$T/d.folded" ] && break
	kill -0 "$rec" 2> /dev/null || break
	sleep 0.1
done
[ -s "$T/d.folded" ] && kill -0 "$rec" 2> /dev/null ||
	{ cat "$T/err"; fail "profile not written 1 s after -d 1, while the command ran"; }
wait "$rec"
rc=$?
set -e
secs=$(( ($(date +%s%N) - start) / 1000000000 ))
[ "$rc" -eq 5 ] || fail "returned $rc, want the command's 5"
[ "$secs" -ge 3 ] || fail "returned after ${secs}s, before the command ended"
samples=$(folded_sum "$T/d.folded" chain "")
# 1 s at 99 Hz of a chain that got cpu/3 of a CPU over its 3 s (all of one
# on an idle machine): ~99 samples, fewer on a loaded one.
cpu=$(cat "$T/cpu")
lo=$(python3 -c "print(int(0.6 * 99 * min(1.0, $cpu / 3)))")
[ "$samples" -ge "$lo" ] && [ "$samples" -le 140 ] ||
	fail "$samples samples for 1 s at 99 Hz ($cpu CPU-s in 3 s), want $lo..140"
echo "ok: -d 1: $samples samples written at 1 s, exit code 5 after ${secs}s"

set +e
"$STRATA" record -F 99 -o "$T/term.folded" -- "$FIX/chain" 30 2> "$T/err" &
rec=$!
# TERM once the command runs (strata holds its exec until its programs are
# loaded: seconds on a loaded machine; a TERM before it ends the command
# before there is anything to write), and has been sampled a while
for _ in $(seq 300); do
	pgrep -P "$rec" -x chain > /dev/null && break
	sleep 0.1
done
sleep 1
kill -TERM "$rec"
wait "$rec"
rc=$?
set -e
[ "$rc" -eq 143 ] || { cat "$T/err"; fail "returned $rc after TERM, want 143 (command killed by TERM)"; }
[ -s "$T/term.folded" ] || fail "no profile after TERM"
echo "ok: TERM forwarded, command's 143 returned, profile written"
