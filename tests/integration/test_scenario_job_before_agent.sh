# Scenario: the job started (and initialised NCCL) before the first agent
# ran, so no agent saw ncclCommInitRank and no state file knows it.  Its
# communicators stay unknown (docs/diagnosis.md: no sound way to recover
# them is implemented yet): nothing may be flagged, and its collectives are
# counted as unplaced.  (Rank 2 is slow: a guess would find it; strata must
# not guess.)
source "$(dirname "$0")/scenario_lib.sh"
export SIM_SLOW_RANK=2 SIM_SLOWDOWN=3 SIM_INIT_MS=500 SIM_FAULT_AFTER_MS=10000
SCEN_JOB_FIRST=5 scenario_start
scenario_check --name job_before_agent --timeout 40 unplaced
