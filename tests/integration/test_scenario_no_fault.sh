# Scenario: no fault, with the noise of a healthy job, for 5 minutes: rank 1
# is 10 ms late (half a step) at one all-reduce in 20, and every 500 steps
# every rank stops 2 s (a checkpoint).  Every rank is judged; no straggler,
# no leak report, no webhook.
source "$(dirname "$0")/scenario_lib.sh"
export SIM_NOISE_RANK=1 SIM_NOISE_ONE_IN=20 SIM_NOISE_MS=10 SIM_PAUSE_EVERY=500 SIM_PAUSE_MS=2000
scenario_start
scenario_check --name no_fault --timeout "${SCEN_NO_FAULT_S:-300}" none
