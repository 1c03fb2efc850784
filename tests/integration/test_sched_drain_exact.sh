# Draining the off-CPU aggregate every 2 ms while a churning child blocks
# and wakes hundreds of thousands of times a second (pipe ping-pong, a
# contended mutex) loses nothing and counts nothing twice: per thread and
# reason, the off-CPU time summed over all drains equals the thread's
# cumulative counter to the nanosecond.  Before the double-buffered drain,
# lookup_and_delete raced with sched_switch/sched_wakeup programs adding
# through a pointer they had looked up.
source "$(dirname "$0")/lib.sh"
require_bpf
"$FIX/sched_drain_exact" 3 2 4 > "$T/out" 2> "$T/err" || rc=$?
cat "$T/out"
case ${rc:-0} in
0) ;;
1) fail "off-CPU drain not exact" ;;
*) cat "$T/err"; fail "sched_drain_exact could not run (rc $rc)" ;;
esac
drains=$(sed -n 's/^drains=\([0-9]*\) .*/\1/p' "$T/out")
blocks=$(sed -n 's/.* blocks=\([0-9]*\) .*/\1/p' "$T/out")
[ "${drains:-0}" -ge 200 ] || fail "only $drains drains: the race was not exercised"
[ "${blocks:-0}" -ge 100000 ] || fail "only $blocks blocks: the race was not exercised"
