# Python frames through agent -> server -> query API: outer -> middle ->
# inner under <module> (tests/fixtures/py_chain.py), stitched by the agent
# in the same order as `strata record` (agent/python/py_stitch.c), sent as PYTHON
# frames (qualname/file/line) between native (build-id, offset) frames.
# The server's folded export must show the chain in order in >= 90% of the
# interpreter's samples, and place it under the native PyEval_EvalCode.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/server_lib.sh"
source "$(dirname "$0")/python_lib.sh"
require_bpf
PY=
for p in $(py_interpreters 2> /dev/null); do PY=$p && break; done
[ -n "$PY" ] || skip "no CPython 3.10-3.13 here"

PORT=$(free_port)
start_server "$PORT"
"$AGENT" --server "http://127.0.0.1:$PORT" --period 1 -F 199 --spool "$T/spool" \
	--node py-node -v 2> "$T/agent.log" &
AGENT_PID=$!
wait_agent_ready "$T/agent.log"
# 5 s: until the agent has read the new interpreter (maps, tables built on
# the builder thread, its Python layout) its samples carry no Python
# frames; on a loaded machine that took ~1 s of a 3-s run (73-83%).
"$PY" "$PYFIX/py_chain.py" 5 &
PY_PID=$!
wait "$PY_PID"
sleep 2.5 # the period holding the end of the run, then its upload
kill -INT "$AGENT_PID"
wait "$AGENT_PID" || fail "agent exited with an error: $(tail -5 "$T/agent.log")"
AGENT_PID=
grep -E '^  python' "$T/agent.log" || true

api "/api/v1/profile?format=folded&pid=$PY_PID" > "$T/py.folded"
head -3 "$T/py.folded"
total=$(folded_sum "$T/py.folded" "" "")
[ "$total" -gt 100 ] || fail "only $total samples of $PY at 199 Hz"
chain=$(py_frames_sum "$T/py.folded" \
	'^<module> \(py_chain\.py:[0-9]+\);outer \(py_chain\.py:[0-9]+\);middle \(py_chain\.py:[0-9]+\);inner \(py_chain\.py:[0-9]+\)$')
assert_ratio "$chain" "$total" 90 "$PY via server: <module>;outer;middle;inner"
placed=$(folded_sum "$T/py.folded" "" ';PyEval_EvalCode;([^;]*;)*<module> \(py_chain\.py')
assert_ratio "$placed" "$chain" 90 "$PY via server: <module> under PyEval_EvalCode (central symbols)"
