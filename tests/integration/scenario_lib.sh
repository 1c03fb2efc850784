# The end-to-end scenario suite (tests/integration/test_scenario_*.sh):
# sourced, not run.  The real pipeline on one node, as deployed:
# strata-server with its defaults (plus the webhook URL and the token the
# agents present) <- strata-agent with exactly the arguments of
# deploy/kubernetes/base/agent-daemonset.yaml (host-wide, no --pid; only
# the server URL, token file and spool directory point into the test's
# directory, and the node name comes from STRATA_NODE_NAME as in the
# DaemonSet) following a simulated 4-rank job (build/fixtures/train_sim on
# the stand-in CUDA/NCCL libraries, ranks exec'd with RANK & co. like
# torchrun) with one fault injected SIM_FAULT_AFTER_MS after the job starts.
# tests/integration/scenario_check.py then polls the API and webhook and
# says which rank and layer the server names, and how long after the onset.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$ROOT/tests/integration/server_lib.sh"
require_bpf
SIM=$ROOT/build/fixtures/train_sim
[ -x "$SIM" ] || fail "$SIM not built (make fixtures)"
DAEMONSET=$ROOT/deploy/kubernetes/base/agent-daemonset.yaml

# The job's shape: 16 kernels of 1 ms per step, so a step (one all-reduce)
# is ~18 ms.  SIM_INIT_MS: a rank takes 5 s from exec to its first CUDA
# call returning (a real one imports torch and creates a CUDA context:
# seconds); the host-wide agent finds it by its RANK label meanwhile (at
# its next drain, every second) and attaches before ncclCommInitRank.  The fault starts
# 25 s after the job, once the agent has shipped its first periods.
export SIM_INIT_MS=${SIM_INIT_MS:-5000} SIM_KERNEL_US=1000
export SIM_FAULT_AFTER_MS=${SIM_FAULT_AFTER_MS:-25000}
SCEN_WINDOW_MS=10000 # the server's default diagnosis window

# daemonset_args URL TOKEN_FILE SPOOL: the DaemonSet's agent arguments, one
# per line, with the three environment-specific values replaced.
daemonset_args() {
	python3 - "$DAEMONSET" "$@" << 'EOF'
import sys, yaml
ds = yaml.safe_load(open(sys.argv[1]))
c = [c for c in ds['spec']['template']['spec']['containers'] if c['name'] == 'agent'][0]
args, here = c['args'], {'--server': sys.argv[2], '--token-file': sys.argv[3], '--spool': sys.argv[4]}
if '--pid' in args or '--cgroup' in args:
    sys.exit('the DaemonSet is not host-wide any more: %s' % args)
out, i = [], 0
while i < len(args):
    out.append(args[i])
    if args[i] in here:
        out.append(here[args[i]])
        i += 1
    i += 1
missing = set(here) - set(out)
if missing:
    sys.exit('the DaemonSet lost %s: %s' % (missing, args))
print('\n'.join(out))
EOF
}

# scenario_agent [SPOOL [NODE]]: starts (again) strata-agent as the
# DaemonSet runs it (spool $T/spool, node scen-node by default).
scenario_agent() {
	local args
	mapfile -t args < <(daemonset_args "http://127.0.0.1:$PORT" "$T/token" "${1:-$T/spool}") ||
		fail "cannot read the DaemonSet's arguments"
	[ -n "${AGENT_ARGS_SHOWN:-}" ] || echo "agent: strata-agent ${args[*]}"
	AGENT_ARGS_SHOWN=1
	STRATA_NODE_NAME=${2:-scen-node} "$AGENT" "${args[@]}" -v 2>> "$T/agent.log" &
	AGENT_PID=$!
}

scenario_agent_stop() { # SIGNAL
	[ -n "${AGENT_PID:-}" ] || return 0
	kill "-${1:-INT}" "$AGENT_PID" 2> /dev/null || true
	wait "$AGENT_PID" 2> /dev/null || true # 137 after a KILL
	AGENT_PID=
}

# k8s_service_env N: the variables Kubernetes puts in every pod's
# environment for each of N services of its namespace (enableServiceLinks,
# on by default), one per line: 7 a service, ~250 bytes.
k8s_service_env() {
	local i name ip
	for ((i = 0; i < $1; i++)); do
		name=TEAM_$((i % 17))_FEATURE_STORE_API_$i ip=10.96.$((i / 250)).$((i % 250 + 1))
		printf '%s\n' "${name}_SERVICE_HOST=$ip" "${name}_SERVICE_PORT=8080" \
			"${name}_PORT=tcp://$ip:8080" "${name}_PORT_8080_TCP=tcp://$ip:8080" \
			"${name}_PORT_8080_TCP_PROTO=tcp" "${name}_PORT_8080_TCP_PORT=8080" \
			"${name}_PORT_8080_TCP_ADDR=$ip"
	done
}

# scenario_job: the job (train_sim 4 ranks, the caller's SIM_* environment)
# in its own process group, so cleanup ends every rank; waits until its
# fault onset is known ($T/train.out).  Its environment is a pod's in a
# namespace of 320 services (~120 KiB) with the job's label after it, and
# train_sim appends RANK & co. at the end, as torchrun does.
scenario_job() {
	# the job's name (host-wide, other jobs on this machine are followed
	# too): STRATA_JOB, or a torchrun-style run id (SCEN_RUN_ID); given to
	# the job alone, so no other process of the test carries a label
	local label=STRATA_JOB=scen-$$
	[ -n "${SCEN_RUN_ID:-}" ] && label=TORCHELASTIC_RUN_ID=$SCEN_RUN_ID
	SCEN_JOB=${label#*=}
	local pod_env
	mapfile -t pod_env < <(k8s_service_env 320)
	env "${pod_env[@]}" "$label" setsid "$SIM" 4 1000000 > "$T/train.out" 2>&1 &
	JOB_PID=$!
	for _ in $(seq 50); do
		grep -q 'fault onset' "$T/train.out" && return 0
		sleep 0.1
	done
	fail "train_sim printed no fault onset: $(cat "$T/train.out")"
}

# scenario_server: the webhook receiver ($T/hooks) and strata-server with
# its defaults plus the webhook URL and the agents' token (TOKEN, PORT).
scenario_server() {
	HOOK_PORT=$(free_port)
	python3 "$ROOT/tests/integration/webhook_receiver.py" "$HOOK_PORT" "$T/hooks" \
		> "$T/hook.log" 2>&1 &
	HOOK_PID=$!
	trap scenario_cleanup EXIT
	scenario_token
	start_server "$PORT" --token-file "$T/token" \
		--alert-webhook "http://127.0.0.1:$HOOK_PORT/hook"
}

# scenario_token: a port for the server and the token its agents present
# (PORT, TOKEN, $T/token).
scenario_token() {
	PORT=$(free_port)
	TOKEN=scenario-token-$$
	echo "$TOKEN" > "$T/token"
	export TOKEN STRATA_TOKEN=$TOKEN
}

# scenario_start: server + webhook receiver + agent + job.  SCEN_JOB_FIRST=S:
# the job starts S seconds before the agent (it initialised unseen).
scenario_start() {
	scenario_server
	if [ -n "${SCEN_JOB_FIRST:-}" ]; then
		scenario_job
		sleep "$SCEN_JOB_FIRST"
		scenario_agent
	else
		scenario_agent
		sleep 2 # loaded and attached, as a DaemonSet pod is before jobs come
		scenario_job
	fi
}

# capture_of JOB TRIGGER: the id of JOB's capture by TRIGGER (an agent's
# own: oom, oom_kill) once the server lists it (40 s at most; "" then).
capture_of() {
	local id=
	for _ in $(seq 40); do
		id=$(api "/api/v1/captures?job=$1" | python3 -c 'import json,sys; c=[x for x in json.load(sys.stdin) if x["trigger"] == sys.argv[1]]; print(c[0]["id"] if c else "")' "$2")
		[ -n "$id" ] && break
		sleep 1
	done
	echo "$id"
}

# scenario_check MODE [RANK LAYER]: see scenario_check.py.
scenario_check() {
	python3 "$ROOT/tests/integration/scenario_check.py" --port "$PORT" --dir "$T" \
		--window-ms "$SCEN_WINDOW_MS" --job "$SCEN_JOB" "$@" ||
		{
			tail -n 5 "$T/agent.log" "$T/server.log"
			fail "scenario $*"
		}
}

scenario_cleanup() {
	[ -n "${JOB_PID:-}" ] && kill -TERM -- "-$JOB_PID" 2> /dev/null
	[ -n "${HOOK_PID:-}" ] && kill "$HOOK_PID" 2> /dev/null
	scenario_agent_stop INT
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
