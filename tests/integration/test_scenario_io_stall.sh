# Scenario: I/O stall.  From the onset rank 1's data loading blocks in
# uncached reads for 15 ms per step (train_sim slow_reads); the server must
# confirm rank 1 and rank the OS layer (off-CPU I/O) first.
source "$(dirname "$0")/scenario_lib.sh"
export SIM_IO_RANK=1 SIM_IO_STALL_MS=15
scenario_start
scenario_check --name io_stall straggler 1 os
