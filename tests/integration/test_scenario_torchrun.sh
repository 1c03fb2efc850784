# Scenario: a torchrun-style launch: the ranks are exec'd one by one with
# RANK, LOCAL_RANK, WORLD_SIZE and TORCHELASTIC_RUN_ID (train_sim execs
# them so), the job named by its run id.  The host-wide agent finds them by
# those labels (agent/sched/sched_targets.c) before their first CUDA call;
# rank 1's data loading stalls on I/O: confirmed, OS layer first, under
# the run id.
source "$(dirname "$0")/scenario_lib.sh"
export SIM_IO_RANK=1 SIM_IO_STALL_MS=15
SCEN_RUN_ID=scen-run-$$
scenario_start
scenario_check --name torchrun straggler 1 os
