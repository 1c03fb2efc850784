# The agent host-wide, with the DaemonSet's arguments, beside targets that
# attack its file readers (tests/fixtures/truncator.c): one truncates and
# restores the library it maps, over and over, each time in a new file
# (an agent that mmapped target files died of SIGBUS); others put a FIFO
# where their library was and exit (an agent that opened it plainly, when
# looking for an exit-time mapping's file by name, blocked for good).  The
# agent must live through it, stop cleanly on SIGINT, and count what it
# could not read.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/server_lib.sh"
require_bpf

PORT=$(free_port)
start_server "$PORT"
mkdir "$T/libs"
# deploy/kubernetes/base/agent-daemonset.yaml's arguments
"$AGENT" --server "http://127.0.0.1:$PORT" --spool "$T/spool" --spool-max 512 --period 10 \
	--freq 49 -v 2> "$T/agent.log" &
AGENT_PID=$!
wait_agent_ready "$T/agent.log"
"$FIX/truncator" "$ROOT/build/strata-server" "$T/libs" 12 > "$T/trunc.out" &
TRUNC=$!
"$FIX/truncator" --fifo "$ROOT/build/strata-server" "$T/libs" 150 > "$T/fifo.out"
wait "$TRUNC" || fail "truncator failed"
cat "$T/trunc.out" "$T/fifo.out"
kill -0 "$AGENT_PID" 2> /dev/null || fail "agent died: $(tail -5 "$T/agent.log")"
sleep 11 # a period: the batch and the symbol uploads the server asks for
kill -INT "$AGENT_PID"
for _ in $(seq 150); do
	kill -0 "$AGENT_PID" 2> /dev/null || break
	sleep 0.1
done
if kill -0 "$AGENT_PID" 2> /dev/null; then
	for task in /proc/"$AGENT_PID"/task/*; do
		echo "thread ${task##*/}: $(cat "$task/comm") in $(cat "$task/wchan" 2> /dev/null)"
		cat "$task/stack" 2> /dev/null | head -8
	done
	tail -20 "$T/agent.log"
	kill -KILL "$AGENT_PID" # its signals wait on the blocked loop
	fail "agent did not stop within 15 s of SIGINT (blocked?)"
fi
wait "$AGENT_PID" || fail "agent exited with $?: $(tail -5 "$T/agent.log")"
AGENT_PID=
grep -E 'modules=|unwind tables:|procs:|upload:' "$T/agent.log" | tail -4
uploads=$(sed -n 's/.*upload: sent=\([0-9]*\).*/\1/p' "$T/agent.log" | tail -1)
[ "${uploads:-0}" -ge 1 ] || fail "no batch uploaded"
echo "ok: the agent lived through $(grep -o '[0-9]* truncations' "$T/trunc.out") and 150 FIFO swaps"
