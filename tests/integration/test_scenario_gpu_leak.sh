# Scenario: GPU memory leak.  From the onset on rank 1 leaks 1 MiB per step
# (leak_activation: cudaMalloc never freed, ~50 MiB/s); the leak report must
# name rank 1 and that stack, and no rank is a straggler.
source "$(dirname "$0")/scenario_lib.sh"
export SIM_LEAK_RANK=1 SIM_LEAK_BYTES=$((1 << 20))
scenario_start
scenario_check --name gpu_leak --timeout 150 leak 1
scenario_promtool StrataGpuMemoryLeak
