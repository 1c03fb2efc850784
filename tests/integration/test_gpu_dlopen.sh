#!/usr/bin/env bash
# The GPU layer finds a CUDA runtime that a process loads late (dlopen, as
# PyTorch does when it is imported), from a file nothing attached before (a
# container's or a pip wheel's copy), host-wide with the DaemonSet's args
# and the server's defaults.  The process runs and is sampled first, so the
# agent watches it and reads its maps at start-up; after that series its
# maps are read again when its dynamic linker reports a change
# (_dl_debug_state: bpf/gpu.bpf.c gpu_dl_notify), not by polling every
# watched process twice a second.  Without that event the next read would
# come 30 s later (GPU_SCAN_IDLE_MS): the calls here come 0.3 s after the
# dlopen and the process is gone 2 s after it.  A second process loads
# three other libraries 250 ms apart first (an import's burst): each event
# comes during the series of maps reads the one before started, the
# runtime's too (sent before ld.so maps it; the call after the mapping is
# rate-limited away), and the series must go on to find it.
# The node's other programs run the same (now hooked) ld.so: 300 short
# processes the agent does not watch must not each send an event (and wake
# it): BPF passes only the watched processes' (mapped_ignored stays ~0),
# and a process leaves that filter when it exits.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/server_lib.sh"
require_bpf
export SIM_INIT_MS=300

PORT=$(free_port)
start_server "$PORT"
"$AGENT" --server "http://127.0.0.1:$PORT" --spool "$T/spool" --spool-max 512 --period 10 \
	--freq 49 -v 2> "$T/agent.log" &
AGENT_PID=$!
wait_agent_ready "$T/agent.log"
"$FIX/gpu_dlopen" "$FIX/libcudart.so" 20 2000 > "$T/w.out" 2>&1 &
W=$!
"$FIX/gpu_dlopen" "$FIX/libcudart.so" 20 2000 burst > "$T/w2.out" 2>&1 &
W2=$!
wait "$W" || fail "gpu_dlopen failed: $(cat "$T/w.out")"
wait "$W2" || fail "gpu_dlopen burst failed: $(cat "$T/w2.out")"
for i in $(seq 300); do /bin/true; done
sleep 1.5 # a drain
if command -v bpftool > /dev/null; then
	# the agent's own filter map (fdinfo names its maps' ids).  The agent
	# opens and closes files all the time: an fd of the glob may be gone
	# when grep reads it, which is status 2, and under pipefail that ended
	# the test with no word (fresh-clone run at 0cfc451)
	ids=$({ grep -h '^map_id:' /proc/"$AGENT_PID"/fdinfo/* 2> /dev/null || true; } | awk '{print $2}')
	left=$(bpftool map show -j | python3 -c '
import json, subprocess, sys
ids, gone = set(sys.argv[1].split()), {int(sys.argv[2]), int(sys.argv[3])}
maps = [m["id"] for m in json.load(sys.stdin) if m.get("name") == "gpu_mapped_last" and str(m["id"]) in ids]
assert len(maps) == 1, maps
keys = {e["formatted"]["key"] for e in json.loads(subprocess.check_output(["bpftool", "map", "dump", "id", str(maps[0]), "-j"]))}
print(" ".join(str(k) for k in sorted(keys & gone)))
' "$ids" "$W" "$W2") || fail "cannot read the agent's gpu_mapped_last"
	[ -z "$left" ] || fail "exited processes still in the dynamic-linker filter: $left"
fi
kill -INT "$AGENT_PID"
wait "$AGENT_PID" || fail "agent exited with an error: $(tail -5 "$T/agent.log")"
AGENT_PID=
gpu_line=$(grep 'gpu: links=' "$T/agent.log" | tail -1)
echo "$gpu_line" | grep -o 'scans=[0-9]* mapped=[0-9]* mapped_ignored=[0-9]* alive_checks=[0-9]* slots_reused=[0-9]* notify_full=[0-9]* dls=[0-9]*' ||
	fail "the agent's gpu counters are not as this test reads them: $gpu_line"
mapped=$(echo "$gpu_line" | sed -n 's/.* mapped=\([0-9]*\) .*/\1/p')
ignored=$(echo "$gpu_line" | sed -n 's/.* mapped_ignored=\([0-9]*\) .*/\1/p')
[ "${mapped:-0}" -ge 1 ] || fail "no dynamic-linker event for a watched process: $gpu_line"
# a process's slot may be let go while its last event is in the ring: a few
[ -n "$ignored" ] && [ "$ignored" -le 20 ] ||
	fail "dynamic-linker events of unwatched processes reached user space: $gpu_line"
echo "$gpu_line" | grep -q ' notify_full=0 ' || fail "watched processes without room in the filter: $gpu_line"
for pid in "$W" "$W2"; do
	grep -q "gpu: tracing pid $pid " "$T/agent.log" ||
		fail "pid $pid never traced: $(grep 'gpu:' "$T/agent.log" | tail -5)"
	api "/api/v1/tally?pid=$pid" > "$T/tally.json"
	api "/api/v1/leaks?pid=$pid" > "$T/leaks.json"
	python3 - "$T/tally.json" "$T/leaks.json" <<'PY' || fail "pid $pid: the late-loaded runtime's calls through the server"
import json, sys
tally = {t["fn"]: t for t in json.load(open(sys.argv[1]))["tally"]}
assert "cudaMalloc" in tally, tally
calls = tally["cudaMalloc"]["calls"]
# the context-creating first call may have entered before the probes were
# attached; the 20 after it may not be missed
assert calls >= 20, tally["cudaMalloc"]
out = json.load(open(sys.argv[2]))["outstanding"]
top = out[0]
assert any("leaky_site" in f for f in top["stack"]), top
assert top["allocations"] >= 20, top
print("ok: %d cudaMalloc calls of a runtime loaded late, %d outstanding at leaky_site" % (calls, top["allocations"]))
PY
done
