# Scenario: the job started (and initialised NCCL) 5 s before the first
# agent ran, so no agent saw ncclCommInitRank and no state file knows it.
# The agent reads each rank's communicator (rank, size) from the process
# with the offsets of the NCCL release its library says it is (the stand-in
# mimics 2.28.9: agent/gpu/nccl_comm.c), and the server matches the four
# ranks by their collective streams (diagnose/comm_align.c): rank 2's slow
# compute must be confirmed as in the other scenarios, on the derived
# communicator, with every stream aligned (docs/diagnosis.md).
source "$(dirname "$0")/scenario_lib.sh"
export SIM_SLOW_RANK=2 SIM_SLOWDOWN=3 SIM_INIT_MS=500 SIM_FAULT_AFTER_MS=10000
SCEN_JOB_FIRST=5 scenario_start
scenario_check --name job_before_agent straggler 2 cuda
api /metrics > "$T/metrics.txt" || fail "GET /metrics"
grep -E '^strata_comm_align_(streams|attempts)_total' "$T/metrics.txt"
grep -q '^strata_comm_align_streams_total{state="aligned"} 4$' "$T/metrics.txt" ||
	fail "want the 4 recovered communicators aligned"
grep 'read from the process' "$T/agent.log" ||
	fail "no communicator read from the process: $(tail -5 "$T/agent.log")"
