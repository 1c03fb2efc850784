# Two strata-server replicas on one ClickHouse store (issue 17; docs/server.md
# "Replicas"): a 4-rank job (tests/fixtures/gen_scenario.c, rank 2 late to
# every all-reduce from its 5th second on, sent live as the DaemonSet's
# agents send: a batch of 10 s (--period 10) each rank when its period
# has ended) sends ranks 0 and 1 to replica a and
# ranks 2 and 3 to replica b.  Exactly one replica (the job's owner)
# reports the straggler, in /api/v1/stragglers, in /metrics
# (strata_straggler_confirmed) and with one webhook; the other reports
# nothing.  Then the owner is killed (SIGKILL); its batches go to the
# survivor (any replica takes any batch), which must report the straggler
# within the replica ttl (10 s) + a beat (2 s) + a poll (2 s) + the store
# read (20 s allowed); its webhook carries the same alert fingerprint.
# Besides: a past range (?from=&to=) is answered by any replica, and deep
# captures made at either replica are known at both.
# NCCL hangs as well: a second job (HANGJOB, split the same way) whose
# rank 1 never comes to all-reduce 100 (it sleeps in a pipe read) while
# ranks 0, 2 and 3 wait in it: one replica reports the hang (rank 1
# missing, blocked on io; 0, 2, 3 waiting) in /api/v1/hangs and /metrics
# with one webhook, the other nothing.  Its name is one the same replica
# owns as the straggler job's (rendezvous hashing of the names over a and
# b), so the kill hands the hang over too: the survivor reports it, the
# store keeps one episode, and the webhooks name one alert.
# Server defaults apart from the store, the replica id and the webhook.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/integration/clickhouse.sh"
SERVER=$ROOT/build/strata-server
SCEN=$ROOT/build/fixtures/gen_scenario
[ -x "$SERVER" ] || fail "$SERVER not built"
[ -x "$SCEN" ] || fail "$SCEN not built (make fixtures)"
ch_start

PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	ch_stop
	rm -rf "$T"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

HOOK_PORT=$(free_port)
python3 "$ROOT/tests/integration/webhook_receiver.py" "$HOOK_PORT" "$T/hooks" > "$T/hook.log" 2>&1 &
PIDS+=($!)

declare -A PORT PID
start_replica() { # ID
	local id=$1
	PORT[$id]=$(free_port)
	"$SERVER" --listen "127.0.0.1:${PORT[$id]}" --store "clickhouse://127.0.0.1:$CH_PORT/strata_rep" \
		--no-debuginfod --buildid-dir "$T/bids-$id" --replica-id "$id" \
		--alert-webhook "http://127.0.0.1:$HOOK_PORT/hook" > "$T/server-$id.log" 2>&1 &
	PID[$id]=$!
	PIDS+=($!)
	wait_healthz "${PORT[$id]}" "${PID[$id]}" "$T/server-$id.log" "replica $id"
}
start_replica a
start_replica b

# confirmed stragglers of the job at replica ID (their ranks, one a line)
confirmed() {
	curl -sf "http://127.0.0.1:${PORT[$1]}/api/v1/stragglers?job=scenario" 2>/dev/null |
		python3 -c 'import json, sys; [print(s["rank"]) for s in json.load(sys.stdin) if s["state"] == "confirmed"]' 2>/dev/null
}
metric_confirmed() { # ID: strata_straggler_confirmed series at 1
	curl -sf "http://127.0.0.1:${PORT[$1]}/metrics" | grep -c '^strata_straggler_confirmed{job="scenario".*} 1$' || true
}

# The job, live: batch p (seconds 10p .. 10p + 9) is sent once its period
# has ended, each rank by a sender of its own (as its agent would); ranks
# 0, 1 to a, ranks 2, 3 to b; a replica that does not answer: the other
# one.  With 1-s batches (16 a second, ten times the shipped rate) this
# machine's ClickHouse fell behind by more than the replicas' 30-s
# lookback, and the takeover found nothing to take.
echo "${PORT[a]}" > "$T/port-a"
echo "${PORT[b]}" > "$T/port-b"
now=$(date +%s)
start=$((now - 4))
HANGJOB=hangjob-1
mkdir -p "$T/b" "$T/h"
# The job outlasts the test: the owner is killed once the checks before
# are done, 37 s in on a quiet machine, later on a slow one (ClickHouse
# 18.16 taking 0.3 s a batch on 2 loaded cores), and batches must still
# come after it.  The senders are stopped at the end.
PERIOD=10 # the DaemonSet's --period
WINDOWS=240
"$SCEN" "$T/b" --fault cpu --rank 2 --windows $WINDOWS --onset 5 --start "$start" --period $PERIOD > "$T/onset"
"$SCEN" "$T/h" --fault hang --rank 1 --windows $WINDOWS --onset 5 --start "$start" --job "$HANGJOB" --period $PERIOD > /dev/null
# A batch neither replica took goes again a second later, as an agent's
# spool would send it (a lost one would fake a missing collective).
send_rank() { # DIR RANK FIRST SECOND
	local r=$2 f id try
	for w in $(seq 0 $((WINDOWS / PERIOD - 1))); do
		while [ "$(date +%s)" -lt $((start + (w + 1) * PERIOD)) ]; do sleep 0.2; done
		f=$(printf '%s/%04d-%d.zst' "$1" "$w" "$r")
		for try in 1 2 3 4 5; do
			for id in "$3" "$4"; do
				if curl -sf --max-time 5 --data-binary @"$f" \
					"http://127.0.0.1:$(cat "$T/port-$id")/api/v1/batches" > /dev/null; then
					[ "$1" = "$T/b" ] && echo "$w $r $id" >> "$T/sent"
					continue 3
				fi
			done
			sleep 1
		done
		echo "$1 window $w rank $r" >> "$T/lost"
	done
}
SENDERS=()
for dir in "$T/b" "$T/h"; do
	for r in 0 1 2 3; do
		if [ "$r" -lt 2 ]; then send_rank "$dir" "$r" a b & else send_rank "$dir" "$r" b a & fi
		SENDERS+=($!)
		PIDS+=($!)
	done
done

# The straggler, found once.
owner=
for _ in $(seq 60); do
	na=$(confirmed a | wc -l)
	nb=$(confirmed b | wc -l)
	[ $((na + nb)) -gt 0 ] && break
	sleep 1
done
[ $((na + nb)) -gt 0 ] || { tail -5 "$T/sent" "$T"/server-*.log; fail "no replica confirmed the straggler"; }
sleep 6 # both replicas polled the store again since
na=$(confirmed a | tr '\n' ' ')
nb=$(confirmed b | tr '\n' ' ')
echo "confirmed at a: [${na}] at b: [${nb}]"
found=$(date +%s.%N)
if [ "$na" = "2 " ] && [ -z "$nb" ]; then owner=a other=b
elif [ "$nb" = "2 " ] && [ -z "$na" ]; then owner=b other=a
else fail "the straggler (rank 2) must be confirmed by exactly one replica: a [$na] b [$nb]"; fi
[ "$(metric_confirmed "$owner")" = 1 ] || fail "/metrics of the owner ($owner): no strata_straggler_confirmed 1"
[ "$(metric_confirmed "$other")" = 0 ] || fail "/metrics of $other: strata_straggler_confirmed although not the owner"
# grep -c, not -q: -q exits at the first match, and under pipefail the
# curl still writing a page larger than the pipe (/metrics is) then fails
# with EPIPE and takes the whole test down
curl -sf "http://127.0.0.1:${PORT[$other]}/metrics" | grep -c '^strata_straggler_confirmed{' > /dev/null &&
	fail "/metrics of $other exports straggler series"
# the firing alerts named ALERTNAME in the webhooks so far: "FINGERPRINT
# rank=R" a line (R: the rank label, "" for none), once each
alerts() {
	python3 - "$T/hooks" "$1" <<'EOF'
import json, os, sys
seen = set()
for line in open(sys.argv[1]) if os.path.exists(sys.argv[1]) else []:
    for a in json.loads(line.split(' ', 1)[1])['alerts']:
        if a['status'] == 'firing' and a['labels']['alertname'] == sys.argv[2]:
            seen.add(f"{a['fingerprint']} rank={a['labels'].get('rank', '')}")
print('\n'.join(sorted(seen)))
EOF
}
# how many webhooks fired ALERTNAME
firing() {
	python3 - "$T/hooks" "$1" <<'EOF'
import json, os, sys
n = 0
for line in open(sys.argv[1]) if os.path.exists(sys.argv[1]) else []:
    h = json.loads(line.split(' ', 1)[1])
    n += sum(a['status'] == 'firing' and a['labels']['alertname'] == sys.argv[2] for a in h['alerts'])
print(n)
EOF
}
firing=$(firing StrataStraggler)
[ "$firing" = 1 ] || { cat "$T/hooks"; fail "$firing firing straggler webhooks, want 1"; }
for id in a b; do
	curl -sf "http://127.0.0.1:${PORT[$id]}/metrics" | grep -E '^strata_(replica_(members|jobs_owned|events_total|polls_total|poll_seconds_total)|store_ingest_seconds_(sum|count)|store_commit_)' |
		sed "s/^/$id: /"
done
decided=$(curl -sf "http://127.0.0.1:${PORT[$owner]}/api/v1/stragglers?job=scenario" |
	python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["decided_at"])')
python3 -c "print(f'owner $owner: decided {$decided - $(cat "$T/onset") / 1e9:.1f} s after the onset (data time); seen by the test {$found - 6 - $(cat "$T/onset") / 1e9:.1f} s after it (wall)')"
echo "ok: replica $owner owns job scenario: the straggler (rank 2) confirmed once, one webhook; replica $other reports none"

# The hang, found once, by the same owner (see the top).
# hangs() ID: "KIND missing=R,.. (STATE/REASON) waiting=R,.. seq=N" per live hang of HANGJOB
hangs() {
	curl -sf "http://127.0.0.1:${PORT[$1]}/api/v1/hangs?job=$HANGJOB" 2>/dev/null | python3 -c '
import json, sys
for h in json.load(sys.stdin):
    m = h["missing"]
    print(h["kind"], "missing=" + ",".join(str(r["rank"]) for r in m),
          "(" + ",".join(r.get("state", "") + "/" + r.get("reason", "") + "/" +
                         str((r.get("last_collective") or {}).get("seq")) for r in m) + ")",
          "waiting=" + ",".join(str(r["rank"]) for r in sorted(h["waiting"], key=lambda r: r["rank"])),
          "seq=%d" % h["seq"])' 2>/dev/null
}
# rank 1's state and its last collective (seq 99) come from its node's batches
WANT_HANG="missing missing=1 (blocked/io/99) waiting=0,2,3 seq=100"
# (the report is the detector's view now: a batch that came late updates it)
owner_of_hang() {
	ha=$(hangs a)
	hb=$(hangs b)
	if [ "$ha" = "$WANT_HANG" ] && [ -z "$hb" ]; then echo a
	elif [ "$hb" = "$WANT_HANG" ] && [ -z "$ha" ]; then echo b; fi
}
for _ in $(seq 40); do
	[ -n "$(owner_of_hang)" ] && break
	sleep 1
done
sleep 4 # both replicas polled the store again since
hang_owner=$(owner_of_hang)
echo "hangs at a: [$(hangs a)] at b: [$(hangs b)]"
[ -n "$hang_owner" ] || fail "the hang ($WANT_HANG) must be reported by exactly one replica"
[ "$hang_owner" = "$owner" ] || fail "$HANGJOB is owned by $hang_owner, the straggler job by $owner: pick a job name the same replica owns"
curl -sf "http://127.0.0.1:${PORT[$owner]}/metrics" | grep -c "^strata_nccl_hang{job=\"$HANGJOB\".* 1$" > /dev/null ||
	fail "/metrics of the owner ($owner): no strata_nccl_hang series at 1"
curl -sf "http://127.0.0.1:${PORT[$other]}/metrics" | grep -c '^strata_nccl_hang{' > /dev/null &&
	fail "/metrics of $other exports hang series"
for _ in $(seq 10); do [ "$(firing StrataNcclHang)" = 1 ] && break; sleep 0.5; done
[ "$(firing StrataNcclHang)" = 1 ] || { cat "$T/hooks"; fail "$(firing StrataNcclHang) firing hang webhooks, want 1"; }
echo "ok: replica $owner reports the hang of $HANGJOB ($WANT_HANG) once, one webhook; replica $other reports none"
[ ! -s "$T/lost" ] || fail "batches no replica took in 5 tries: $(head -3 "$T/lost")"

# A past range is judged again from the store: any replica answers it.
on=$(($(cat "$T/onset") / 1000000000))
curl -sf "http://127.0.0.1:${PORT[$other]}/api/v1/stragglers?job=scenario&from=$((on - 10))&to=$(date +%s)" |
	python3 -c 'import json, sys; e = json.load(sys.stdin); assert [x["rank"] for x in e] == [2], e' ||
	fail "/api/v1/stragglers?from=&to= at $other"
echo "ok: replica $other finds the episode of a past range from the store"

# Deep captures reach every replica (agents send to any): the owner's
# capture of the straggler, and one asked of the other replica.
id=$(curl -sf -X POST "http://127.0.0.1:${PORT[$other]}/api/v1/captures?job=scenario&duration_s=5" |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])') || fail "POST capture at $other"
for _ in $(seq 20); do
	curl -sf "http://127.0.0.1:${PORT[$owner]}/api/v1/captures/$id" > /dev/null && break
	sleep 0.5
done
curl -sf "http://127.0.0.1:${PORT[$owner]}/api/v1/captures/$id" > /dev/null ||
	fail "capture $id made at $other unknown at $owner after 10 s"
curl -sf "http://127.0.0.1:${PORT[$other]}/api/v1/captures?job=scenario" | grep -c '"trigger":"straggler"' > /dev/null ||
	fail "the owner's straggler capture is unknown at $other"
echo "ok: captures made at either replica are known at both"

# The owner dies: the survivor takes over.  Not before the hang is older
# than the lookback (30 s): the survivor must name rank 1's last
# collective from before it (the seed read of a job new to a replica).
while [ "$(date +%s)" -lt $((start + 5 + 32)) ]; do sleep 0.5; done
echo "the hang is $(($(date +%s) - start - 5)) s old at the kill"
log_at_kill=$(stat -c %s "$T/server-$other.log")
kill -KILL "${PID[$owner]}"
killed=$(date +%s.%N)
# how far the senders are behind (ingest slower than the job): past the
# replicas' lookback (30 s) the survivor would find nothing to take over
echo "at the kill: batch $((($(date +%s) - start) / PERIOD - 1)) is due, the last stored is $(tail -1 "$T/sent" | cut -d' ' -f1)"
echo 0 > "$T/port-$owner" # its batches go to the survivor
nsent=$(wc -l < "$T/sent")
taken=
for _ in $(seq 60); do
	if [ "$(confirmed "$other" | tr '\n' ' ')" = "2 " ]; then
		taken=$(date +%s.%N)
		break
	fi
	sleep 0.5
done
[ -n "$taken" ] || { tail -20 "$T/server-$other.log"; fail "replica $other did not take over the straggler in 30 s"; }
secs=$(python3 -c "print(f'{$taken - $killed:.1f}')")
echo "takeover: replica $other confirmed the straggler ${secs} s after replica $owner was killed (ttl 10 s, beat 2 s, poll 2 s)"
python3 -c "import sys; sys.exit(0 if $taken - $killed <= 20 else 1)" || fail "takeover took ${secs} s (> 20)"
[ "$(metric_confirmed "$other")" = 1 ] || fail "/metrics of $other after takeover"
tail -c +$((log_at_kill + 1)) "$T/server-$other.log" | grep -c 'replicas: job scenario is diagnosed here from now on' > /dev/null ||
	fail "replica $other logged no takeover of job scenario"
curl -sf "http://127.0.0.1:${PORT[$other]}/metrics" | grep -c '^strata_replica_members 1$' > /dev/null ||
	fail "replica $other still counts the killed replica"
# the survivor's alert is the same alert
fps=$(alerts StrataStraggler)
[ "$(echo "$fps" | wc -l)" = 1 ] && [ "${fps#* }" = "rank=2" ] || fail "straggler webhooks after takeover: $fps"
echo "ok: webhooks name one alert (fingerprint ${fps%% *})"
# any replica takes any batch: the killed owner's ranks went to the survivor
# (a period's 4 batches may have been in flight at the kill: the next 4)
for _ in $(seq 50); do
	[ "$(wc -l < "$T/sent")" -ge $((nsent + 5)) ] && break
	sleep 0.5
done
late=$(tail -n +$((nsent + 5)) "$T/sent") # those stored after the kill
[ -n "$late" ] || fail "no batch sent after the kill"
echo "$late" | awk -v o="$owner" '$3 == o { bad = 1 } END { exit bad }' ||
	fail "a batch was stored by the killed replica"
echo "ok: $(echo "$late" | wc -l) batches after the kill, all stored by replica $other"

# The hang went over with the job: the survivor reports it (rank 1 with
# its state and last collective, read from before its lookback), the store
# keeps its one episode (the new owner's record has the episode's id),
# and every hang webhook names one alert.
for _ in $(seq 20); do
	[ "$(hangs "$other")" = "$WANT_HANG" ] && break
	sleep 0.5
done
[ "$(hangs "$other")" = "$WANT_HANG" ] || fail "replica $other did not take the hang over: [$(hangs "$other")]"
seeded=$(curl -sf "http://127.0.0.1:${PORT[$other]}/metrics" | sed -n 's/^strata_replica_events_total{what="seeded"} //p')
[ "${seeded:-0}" -gt 0 ] || fail "replica $other read no rank's last collective before its lookback"
echo "ok: replica $other took the hang over ($seeded last collectives read from before its lookback)"
curl -sf "http://127.0.0.1:${PORT[$other]}/api/v1/hangs?job=$HANGJOB&from=$((start - 10))&to=$(date +%s)" |
	python3 -c 'import json, sys; e = json.load(sys.stdin); assert len(e) == 1 and e[0]["kind"] == "missing" and e[0]["until"] is None, e' ||
	fail "the store's hang episodes of $HANGJOB at $other (want one, ongoing)"
fps=$(alerts StrataNcclHang)
[ "$(echo "$fps" | wc -l)" = 1 ] || fail "hang webhooks after takeover: $fps"
echo "ok: the hang went over to the survivor, one episode in the store, one alert (fingerprint ${fps%% *})"
for p in "${SENDERS[@]}"; do kill "$p" 2>/dev/null || true; done
echo "ok: two replicas, one straggler, one alert; takeover in ${secs} s"
