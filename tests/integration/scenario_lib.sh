# The end-to-end scenario suite (tests/integration/test_scenario_*.sh):
# sourced, not run.  The real pipeline on one node: strata-server (SQLite,
# 2 s diagnosis windows, webhook to a local receiver) <- strata-agent
# (--server, 1 s periods, GPU layer on) following a simulated 4-rank job
# (build/fixtures/train_sim on the stand-in CUDA/NCCL libraries) with one
# fault injected SIM_FAULT_AFTER_MS after the job starts.
# tests/integration/scenario_check.py then polls the API and webhook and
# says which rank and layer the server names, and how long after the onset.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$ROOT/tests/integration/server_lib.sh"
require_bpf
SIM=$ROOT/build/fixtures/train_sim
[ -x "$SIM" ] || fail "$SIM not built (make fixtures)"

# The job's shape: 16 kernels of 1 ms per step, so a step is ~18 ms and a
# 2 s window holds ~100 all-reduces; SIM_INIT_MS: the first CUDA call
# creates a context, as on a real GPU (the agent attaches meanwhile).
export SIM_INIT_MS=400 SIM_KERNEL_US=1000 SIM_FAULT_AFTER_MS=${SIM_FAULT_AFTER_MS:-4000}
SCEN_WINDOW_MS=2000

# scenario_start: server + webhook receiver + agent + the job (train_sim 4
# ranks, the caller's SIM_* environment), returns once the job runs and
# its fault onset is known ($T/train.out).
scenario_start() {
	HOOK_PORT=$(free_port)
	python3 "$ROOT/tests/integration/webhook_receiver.py" "$HOOK_PORT" "$T/hooks" \
		> "$T/hook.log" 2>&1 &
	HOOK_PID=$!
	trap scenario_cleanup EXIT
	PORT=$(free_port)
	start_server "$PORT" --diag-window-ms "$SCEN_WINDOW_MS" \
		--alert-webhook "http://127.0.0.1:$HOOK_PORT/hook"
	# The job waits for the agent, then runs in its own process group (so
	# cleanup ends every rank); the agent follows it by pid.
	mkfifo "$T/go"
	setsid bash -c 'read -r _ < "$1"; exec "$2" 4 100000' _ "$T/go" "$SIM" \
		> "$T/train.out" 2>&1 &
	JOB_PID=$!
	"$AGENT" --server "http://127.0.0.1:$PORT" --period 1 -F 49 --spool "$T/spool" \
		--node scen-node --pid "$JOB_PID" --drain-interval 250 -v 2> "$T/agent.log" &
	AGENT_PID=$!
	wait_agent "$T/agent.log"
	echo go > "$T/go"
	for _ in $(seq 50); do
		grep -q 'fault onset' "$T/train.out" && return 0
		sleep 0.1
	done
	fail "train_sim printed no fault onset: $(cat "$T/train.out")"
}

# scenario_check MODE [RANK LAYER]: see scenario_check.py.
scenario_check() {
	python3 "$ROOT/tests/integration/scenario_check.py" --port "$PORT" --dir "$T" \
		--window-ms "$SCEN_WINDOW_MS" "$@" ||
		{
			tail -n 5 "$T/agent.log" "$T/server.log"
			fail "scenario $*"
		}
}

scenario_cleanup() {
	[ -n "${JOB_PID:-}" ] && kill -TERM -- "-$JOB_PID" 2> /dev/null
	[ -n "${HOOK_PID:-}" ] && kill "$HOOK_PID" 2> /dev/null
	if [ -n "${AGENT_PID:-}" ]; then
		kill -INT "$AGENT_PID" 2> /dev/null
		wait "$AGENT_PID" 2> /dev/null
		AGENT_PID=
	fi
	if [ -n "${KEEP_T:-}" ]; then
		stop_server
		echo "kept $T"
	else
		cleanup_server
	fi
}

# scenario_promtool ALERTNAME...: the shipped rules (deploy/prometheus) on
# this run's real /metrics scrape: each named alert must fire, for exactly
# the series the server flags (metrics_to_promtool.py).
scenario_promtool() {
	command -v promtool > /dev/null || {
		echo "promtool not installed: rules not checked on real metrics"
		return 0
	}
	api /metrics > "$T/metrics.txt" || fail "GET /metrics"
	python3 "$ROOT/tests/integration/metrics_to_promtool.py" "$T/metrics.txt" \
		"$ROOT/deploy/prometheus/strata-rules.yml" "$@" > "$T/promtool.yml" 2> "$T/promtool.err" ||
		fail "metrics_to_promtool: $(cat "$T/promtool.err")"
	grep -q ': 0 alerts expected' "$T/promtool.err" && fail "no alert expected: $(cat "$T/promtool.err")"
	promtool test rules "$T/promtool.yml" > "$T/promtool.out" 2>&1 ||
		fail "promtool test rules on real /metrics: $(cat "$T/promtool.out")"
	echo "ok: promtool test rules on this run's /metrics: $(tr '\n' ' ' < "$T/promtool.err")"
}
