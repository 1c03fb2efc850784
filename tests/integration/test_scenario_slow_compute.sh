# Scenario: slow compute.  Rank 2's simulated kernels take 2x longer from
# the onset on, so it reaches every all-reduce ~16 ms after its peers; the
# server must confirm rank 2 (webhook) and rank the CUDA layer first (it
# blocks longer in stream syncs).
source "$(dirname "$0")/scenario_lib.sh"
export SIM_SLOW_RANK=2 SIM_SLOWDOWN=2
scenario_start
scenario_check --name slow_compute straggler 2 cuda
scenario_promtool StrataStragglerConfirmed
