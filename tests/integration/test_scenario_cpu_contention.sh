# Scenario: CPU contention.  Ranks 0-2 share CPU 0, rank 3 runs alone on
# CPU 1 (SIM_PIN_CPUS); each rank does SIM_PREP_US of real CPU work per step
# (CPU time, several scheduler slices, so a waking rank cannot finish it
# inside one slice).  At the onset a busy process of HOG_THREADS spinning
# threads pinned to CPU 1 starts, so rank 3 gets a fraction of its CPU and
# waits runnable; the server must confirm rank 3 and rank the CPU layer
# first.  The test checks that the hog really ran (its CPU time) and prints
# every rank's measured step times before and after the onset.
source "$(dirname "$0")/scenario_lib.sh"
[ "$(nproc)" -ge 2 ] || skip "needs 2 CPUs"
HOG_THREADS=${HOG_THREADS:-8} HOG_NICE=${HOG_NICE:--10}
export SIM_PIN_CPUS=0,0,0,1 SIM_PREP_US=${SIM_PREP_US:-4000}
scenario_start
onset=$(sed -n 's/.*fault onset at //p' "$T/train.out")
sleep "$(python3 -c "import time; print(max(0, $onset - time.time()))")"
# The hog is its own session, and with autogroup (kernel.sched_autogroup_enabled)
# a session's threads together weigh one task, so plain hog threads would
# only take half of CPU 1 whatever their number and rank 3 (2x its CPU time)
# would still beat ranks 0-2 (3x theirs on CPU 0).  A noisy neighbour of
# higher priority: its autogroup at nice $HOG_NICE (set from inside, after
# setsid, so no other session is touched).
setsid taskset -c 1 sh -c '[ -w /proc/self/autogroup ] && echo "$2" > /proc/self/autogroup
	for i in $(seq "$1"); do (printf %s strata-hog > /proc/self/comm; while :; do :; done) & done; wait' _ "$HOG_THREADS" "$HOG_NICE" &
HOG_PID=$!
trap 'kill -- -$HOG_PID 2> /dev/null; scenario_cleanup' EXIT
# CPU layer evidence: the hog (comm strata-hog) named among the
# other processes on rank 3's CPUs (ForeignRun rows charged by TargetCpu),
# as foreign_cpu_share's evidence or runnable_share's (both cite them;
# foreign_cpu_share alone misses the score bar in some runs, its peers'
# share on CPU 0 varying).
scenario_check --name cpu_contention --want-finding foreign_cpu_share,runnable_share:strata-hog \
	straggler 3 cpu
# The hog's CPU seconds (every process of its session): it must have run.
# The hog's CPU time (utime + stime of every process of its session): it
# must have run, most of CPU 1 since the onset.
hog_s=$(for p in $(ps -o pid= -s "$HOG_PID"); do cat "/proc/$p/stat" 2> /dev/null; done |
	awk -v hz="$(getconf CLK_TCK)" '{t += $14 + $15} END {printf "%.2f", t / hz}')
run_s=$(python3 -c "import time; print(round(time.time() - $onset, 2))")
echo "hog: $HOG_THREADS threads on CPU 1 (autogroup nice $HOG_NICE): $hog_s CPU s in $run_s s"
python3 -c "import sys; sys.exit($hog_s < 0.5 * $run_s)" ||
	fail "the hog did not run: $hog_s CPU s in $run_s s"
echo "measured mean step times (ms) every 2 s, fault off/on:"
grep 'mean step' "$T/train.out" | awk '{r[$3] = r[$3] " " $8 "(" $NF ")"} END {for (k in r) print "rank " k r[k]}' | sort
