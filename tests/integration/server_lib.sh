# Helpers for the strata-server tests: sourced after lib.sh, not run.
SERVER=$ROOT/build/strata-server
GEN=$ROOT/build/fixtures/gen_batch

# A TCP port nothing listens on now.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_server PORT [extra args]: runs strata-server with a SQLite store in
# $T (kept across restarts), sets SRV_PID, waits until /healthz answers.
# debuginfod: none, or the one at $DBGD_URL when set (cache in $T/dcache).
start_server() {
	local port=$1 env=(env) dbgd=(--no-debuginfod)
	shift
	if [ -n "${DBGD_URL:-}" ]; then
		env+=("DEBUGINFOD_URLS=$DBGD_URL" "DEBUGINFOD_CACHE_PATH=$T/dcache" DEBUGINFOD_TIMEOUT=10)
		dbgd=()
	fi
	"${env[@]}" "$SERVER" --listen "127.0.0.1:$port" --store "sqlite:$T/server.db" \
		"${dbgd[@]}" "$@" >> "$T/server.log" 2>&1 &
	SRV_PID=$!
	wait_healthz "$port" "$SRV_PID" "$T/server.log" server
}

stop_server() {
	[ -n "${SRV_PID:-}" ] || return 0
	kill "$SRV_PID" 2> /dev/null || true
	wait "$SRV_PID" 2> /dev/null || true
	SRV_PID=
}

# api PATH: GET from the server on $PORT (with $TOKEN when set).
api() {
	curl -sf ${TOKEN:+-H "Authorization: Bearer $TOKEN"} "http://127.0.0.1:$PORT$1"
}

# Sum of a JSON list's numeric field: json_sum KEY FIELD < json
json_sum() {
	python3 -c 'import json, sys; print(sum(x[sys.argv[2]] for x in json.load(sys.stdin)[sys.argv[1]]))' "$1" "$2"
}

# assert_stored_once NODE FINAL_LINE: the server on $PORT holds NODE's
# batches and samples exactly as the agent's "final batches" line says it
# built them (none lost, none twice).
assert_stored_once() {
	local built samples s_batches s_samples
	built=$(sed -n 's/.*built=\([0-9]*\).*/\1/p' <<< "$2")
	samples=$(sed -n 's/.* samples=\([0-9]*\).*/\1/p' <<< "$2")
	[ -n "$built" ] && [ -n "$samples" ] || fail "no final batches line from the agent: $2"
	api "/api/v1/nodes?node=$1" > "$T/nodes.json"
	s_batches=$(json_sum nodes batches < "$T/nodes.json")
	s_samples=$(json_sum nodes cpu_samples < "$T/nodes.json")
	echo "server: $s_batches batches, $s_samples samples"
	[ "$s_batches" -eq "$built" ] || fail "agent built $built batches, server stored $s_batches"
	[ "$s_samples" -eq "$samples" ] || fail "agent sampled $samples, server stored $s_samples"
	STORED_BATCHES=$built STORED_SAMPLES=$samples
}

cleanup_server() {
	stop_server
	[ -n "${AGENT_PID:-}" ] && kill "$AGENT_PID" 2> /dev/null
	rm -rf "$T"
}
trap cleanup_server EXIT
# KEEP_T: the files stay, the processes go (a host-wide agent left running
# would sample every test after this one)
if [ -n "${KEEP_T:-}" ]; then
	trap 'stop_server; [ -n "${AGENT_PID:-}" ] && kill "$AGENT_PID" 2> /dev/null; echo "kept $T"' EXIT
fi
