# Scenario: no fault (the false-positive check).  20 s of a healthy 4-rank
# job: every rank judged, no straggler, no leak report, no webhook.
source "$(dirname "$0")/scenario_lib.sh"
scenario_start
scenario_check --name no_fault --timeout 20 none
