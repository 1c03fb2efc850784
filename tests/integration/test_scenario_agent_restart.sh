# Scenario: the agent restarts in the middle of the job (a DaemonSet
# rollout or an OOM kill: SIGKILL, no goodbye) 20 s in, 15 s before the
# fault, and comes back 3 s later.  The
# new agent restores the communicators' identities from the spool
# directory (agent/gpu/gpu_comm_state.c), so rank 2's slow compute is
# still confirmed, as fast, on the restored communicator.
source "$(dirname "$0")/scenario_lib.sh"
export SIM_SLOW_RANK=2 SIM_SLOWDOWN=3 SIM_FAULT_AFTER_MS=35000
scenario_start
sleep 20
scenario_agent_stop KILL
sleep 3
scenario_agent
for _ in $(seq 100); do
	grep -q 'NCCL communicators restored' "$T/agent.log" && break
	sleep 0.2
done
grep 'NCCL communicators restored' "$T/agent.log" || fail "no communicator restored: $(tail -5 "$T/agent.log")"
scenario_check --name agent_restart straggler 2 cuda
