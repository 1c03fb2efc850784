#!/usr/bin/env bash
# The scheduler layer's foreign-process map does not fill with the dead
# (shipped DaemonSet args, server defaults).  A labelled rank spins on CPU
# 0 while 6,000 short processes run there one after another over ~45 s
# (four 10-s windows): each is foreign time on the rank's CPU, one (CPU,
# process) entry of a 4096-entry BPF map.  An entry unchanged for a window
# is deleted (its process is gone), so the map holds the recent ones and
# none is refused (foreign_full=0).  Before, the map filled after 4,096 of
# them and every later foreign process and rank CPU went unreported, on a
# node that starts processes, within minutes.
source "$(dirname "$0")/scenario_lib.sh"
command -v taskset > /dev/null || skip "needs taskset"

scenario_server
scenario_agent
sleep 2
STRATA_JOB=churn-$$ taskset -c 0 sh -c 'while :; do :; done' &
RANK_PID=$!
sleep 3 # found by its label at a drain
for i in $(seq 6000); do
	taskset -c 0 true
	[ $((i % 150)) -eq 0 ] && sleep 1
done
sleep 12 # the last window closes
kill "$RANK_PID"
scenario_agent_stop INT
line=$(grep '^  sched:' "$T/agent.log" | tail -1) || fail "no sched counters: $(tail "$T/agent.log")"
rows=$(grep '^  sched rows:' "$T/agent.log" | tail -1) || fail "no sched rows line"
full=$(echo "$line" | sed -n 's/.* foreign_full=\([0-9]*\).*/\1/p')
forgot=$(echo "$rows" | sed -n 's/.* cpu_rows_forgotten=\([0-9]*\).*/\1/p')
echo "agent: $(echo "$line" | grep -o 'foreign_full=[0-9]*'), $(echo "$rows" | grep -o 'cpu_rows_forgotten=[0-9]*')"
[ "${full:-x}" = 0 ] || fail "foreign-process map full: $line"
[ "${forgot:-0}" -ge 3000 ] || fail "only ${forgot:-0} idle entries deleted: $rows"
echo "ok: 6000 short foreign processes on a rank's CPU, none refused, $forgot idle entries let go"
