# A node runs jobs from many container images over weeks, each image with
# its own copy (its own inode) of the CUDA runtime.  The GPU layer keeps
# GPU_MAX_FILES (64) files in use, not 64 files ever seen: once no process
# maps a copy (its grace over, then the module registry's idle time), its
# slot is given back.  The agent runs as the DaemonSet runs it; 40 ranks
# (found by their labels) each load their own copy, then, once those are
# gone and idle, 32 more ranks load 32 more copies: 72 files in all, every
# rank traced, its calls at the server.
source "$(dirname "$0")/scenario_lib.sh"

scenario_token
start_server "$PORT" --token-file "$T/token"
scenario_agent "$T/spool" images-node
wait_agent_ready "$T/agent.log"
mkdir "$T/img"
for i in $(seq 72); do cp "$FIX/libcudart.so" "$T/img/libcudart-$i.so"; done
cp "$FIX/libcuda.so" "$T/img/" # the driver: the host's, one file in every container

export SIM_INIT_MS=300 GPU_DLOPEN_SPIN_S=0.05
wave() { # FIRST LAST: one rank per copy, all at once; their pids in $T/pids
	local i pids=()
	for i in $(seq "$1" "$2"); do
		RANK=$i STRATA_JOB=images-$$ "$FIX/gpu_dlopen" "$T/img/libcudart-$i.so" 3 300 \
			> "$T/r$i.out" 2>&1 &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do
		wait "${pids[$i]}" || fail "rank $(($1 + i)) failed: $(cat "$T/r$(($1 + i)).out")"
	done
	printf '%s\n' "${pids[@]}" >> "$T/pids"
	echo "ranks $1..$2 done"
}
wave 1 40
# their copies unused: detached after the grace (5 s), then evicted by
# the module registry after 60 drains without a user
sleep 70
wave 41 72
sleep 12 # the last batch's period
kill -INT "$AGENT_PID"
wait "$AGENT_PID" || fail "agent failed: $(tail -5 "$T/agent.log")"
AGENT_PID=

gpu_line=$(grep 'gpu: links=' "$T/agent.log" | tail -1)
echo "$gpu_line" | grep -o 'files_attached=[0-9]* files_freed=[0-9]* files_dropped=[0-9]*'
freed=$(sed -n 's/.* files_freed=\([0-9]*\) .*/\1/p' <<< "$gpu_line")
[ "${freed:-0}" -ge 8 ] || fail "fewer than 8 slots given back: $gpu_line"
grep -q ' files_dropped=0 ' <<< "$gpu_line" || fail "copies not traced for want of a slot: $gpu_line"
untraced=0
while read -r pid; do
	grep -q "gpu: tracing pid $pid " "$T/agent.log" || untraced=$((untraced + 1))
done < "$T/pids"
[ "$untraced" -eq 0 ] || fail "$untraced of 72 ranks never traced"
# the last wave's calls (its copies took slots given back) at the server
for pid in $(tail -3 "$T/pids"); do
	api "/api/v1/tally?pid=$pid" | python3 -c '
import json, sys
t = {r["fn"]: r for r in json.load(sys.stdin)["tally"]}
assert t.get("cudaMalloc", {}).get("calls", 0) >= 3, t' ||
		fail "pid $pid: its cudaMalloc calls are not at the server"
done
echo "ok: 72 copies of the runtime, every rank traced, $freed slots given back"
