# The node's disk is the job's too: a checkpoint fills it, a cleanup
# removes the spool directory.  strata-agent runs as the DaemonSet runs it
# (its exact arguments; the spool on a 1-MiB tmpfs filled to the last
# block before the agent starts), the server as shipped (token) with one
# outage while the disk is full.  Every batch the agent built is stored
# exactly once: the full disk's batches were held in memory (also through
# the outage), and after the disk is freed and the directory removed, the
# directory is made again and the batches go through it.
source "$(dirname "$0")/scenario_lib.sh"

DISK=$T/disk
mkdir -p "$DISK"
mount -t tmpfs -o size=1m tmpfs "$DISK" || skip "cannot mount a tmpfs"
on_exit() { # the agent, the tmpfs, then the server (and $T unless KEEP_T)
	scenario_agent_stop INT
	umount -l "$DISK" 2> /dev/null || true
	if [ -n "${KEEP_T:-}" ]; then stop_server; echo "kept $T"; else cleanup_server; fi
}
trap on_exit EXIT
mkdir "$DISK/spool"
dd if=/dev/zero of="$DISK/fill" bs=4k 2> /dev/null || true # to ENOSPC
if echo x 2> /dev/null > "$DISK/spool/probe"; then fail "the tmpfs is not full"; fi
rm -f "$DISK/spool/probe"

scenario_token
start_server "$PORT" --token-file "$T/token"
scenario_agent "$DISK/spool" full-node
wait_agent_ready "$T/agent.log"
"$FIX/chain" 46 &
LOAD=$!

sleep 12 # the first period's batch: held in memory, sent from there
stop_server
echo "server down (disk full)"
sleep 12 # the second period's batch waits in memory
start_server "$PORT" --token-file "$T/token"
echo "server up again"
sleep 2
rm -f "$DISK/fill"
rm -rf "$DISK/spool"
echo "disk freed, spool directory removed"
wait "$LOAD"
kill -INT "$AGENT_PID"
wait "$AGENT_PID" || fail "agent failed: $(tail -5 "$T/agent.log")"
AGENT_PID=

final=$(grep -E '^agent: final batches:' "$T/agent.log" | tail -1)
spool=$(grep -E '^  spool: ' "$T/agent.log" | tail -1)
up=$(grep -E '^  upload: ' "$T/agent.log" | tail -1)
echo "$final"
echo "agent:$spool"
echo "agent:$up"
[ -n "$final" ] && [ -n "$spool" ] && [ -n "$up" ] || fail "the agent did not report: $(tail -5 "$T/agent.log")"
field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<< "$2"; }
[ "$(field rows_dropped "$final")" -eq 0 ] || fail "the batch builder dropped samples"
[ "$(field disk_failed "$spool")" -ge 2 ] || fail "the full disk refused no batch: $spool"
[ "$(field dir_made "$spool")" -ge 1 ] || fail "the removed directory was not made again: $spool"
for k in dropped_full write_failed lost; do
	[ "$(field $k "$spool")" -eq 0 ] || fail "the spool lost batches ($k): $spool"
done
[ "$(field failures "$up")" -gt 0 ] || fail "the agent never saw the outage"
[ "$(spooled_batches "$DISK/spool")" = 0 ] || fail "batches left in the spool: $(ls "$DISK/spool")"

assert_stored_once full-node "$final"
echo "ok: $STORED_BATCHES batches and $STORED_SAMPLES samples through a full disk, an outage and a removed spool, each stored once"
