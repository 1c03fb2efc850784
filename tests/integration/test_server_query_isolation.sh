#!/usr/bin/env bash
# Queries never hold up the agents' batches (server/query_pool.h), with
# the server's defaults.  A pprof profile of 120 stored batches takes
# seconds; with six of them in flight (two running on the query threads,
# four waiting), a batch POSTed after them is stored and answered while
# every one of them is still running.  Before, queries ran on the
# connection threads and a batch waited behind one (21 s behind six
# 6-s queries: docs/benchmarks.md).  Past the query queue (64 waiting) a
# query is answered 503 with Retry-After at once and counted; the others
# are all answered.  A query whose client hangs up is stopped (or, still
# waiting, never run) and counted: six slow queries whose clients give up
# leave the query threads free within a fraction of one query's time.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/server_lib.sh"

PORT=$(free_port)
start_server "$PORT"
now=$(date +%s)
"$GEN" post "http://127.0.0.1:$PORT" --count 120 --stacks 1500 --depth 40 --ranks 8 \
	--threads 2 --nodes 4 --start $((now - 3600)) > "$T/fill.out" 2>&1
grep -q 'ok=120 failed=0' "$T/fill.out" || fail "filling the store: $(cat "$T/fill.out")"
SLOW="/api/v1/profile?format=pprof&from=$((now - 7200))&to=$((now + 60))"
stamp() { date +%s.%N > "$1"; }

# A. six slow queries, then a batch
stamp "$T/a.start"
pids=()
for i in 1 2 3 4 5 6; do
	(
		curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT$SLOW" > "$T/q$i.code"
		stamp "$T/q$i.end"
	) &
	pids+=($!)
done
sleep 0.5
"$GEN" post "http://127.0.0.1:$PORT" --count 1 --stacks 1500 --depth 40 --ranks 8 --seed 7 \
	--start $((now - 30)) > "$T/batch.out" 2>&1
stamp "$T/batch.end"
wait "${pids[@]}" # (not the server)
grep -q 'ok=1 failed=0' "$T/batch.out" || fail "the batch during the queries: $(cat "$T/batch.out")"
python3 - "$T" <<'PY' || fail "a batch waited for a query"
import sys
t = sys.argv[1]
codes = [open(f"{t}/q{i}.code").read() for i in range(1, 7)]
assert codes == ["200"] * 6, f"query answers: {codes}"
ends = [float(open(f"{t}/q{i}.end").read()) for i in range(1, 7)]
batch = float(open(f"{t}/batch.end").read())
first = min(ends)
assert batch < first, f"batch answered {batch - first:.1f} s after the first query"
print(f"ok: the batch answered {first - batch:.1f} s before the first of 6 queries")
open(f"{t}/one_query_s", "w").write("%.3f" % (first - float(open(f"{t}/a.start").read())))
PY

# B. two slow queries hold the query threads; 80 quick ones come: 64 wait,
# the rest are refused at once
pids=()
for i in 1 2; do
	curl -s -o /dev/null "http://127.0.0.1:$PORT$SLOW" &
	pids+=($!)
done
sleep 0.5
for i in $(seq 80); do
	curl -s -D "$T/h$i" -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$PORT/api/v1/jobs" \
		> "$T/j$i.code" &
	pids+=($!)
done
wait "${pids[@]}"
ok=$(cat "$T"/j*.code | grep -c '^200$' || true)
busy=$(cat "$T"/j*.code | grep -c '^503$' || true)
[ $((ok + busy)) -eq 80 ] || fail "80 queries: $ok answered, $busy refused, the rest: $(sort "$T"/j*.code | uniq -c)"
[ "$busy" -ge 1 ] && [ "$ok" -ge 64 ] || fail "queue of 64: $ok answered, $busy refused"
grep -l '^HTTP/1.1 503' "$T"/h* | head -1 | xargs grep -qi '^Retry-After: 5' ||
	fail "a 503 without Retry-After"
metrics=$(curl -s "http://127.0.0.1:$PORT/metrics")
refused=$(echo "$metrics" | sed -n 's/^strata_queries_refused_total \([0-9]*\)/\1/p')
[ "$refused" = "$busy" ] || fail "strata_queries_refused_total $refused, $busy answered 503"
echo "$metrics" | grep -q '^strata_queries_waiting 0' || fail "queries still waiting: $metrics"
echo "ok: 80 queries behind 2 slow ones: $ok answered, $busy refused at once (counted)"

# C. six slow queries (two running, four waiting) whose clients give up
# after 0.5 s: the running ones are stopped, the waiting ones never run
idle() { # the query threads idle and nothing waiting
	local m
	m=$(curl -s "http://127.0.0.1:$PORT/metrics")
	echo "$m" | grep -q '^strata_queries_running 0' && echo "$m" | grep -q '^strata_queries_waiting 0'
}
pids=()
for i in 1 2 3 4 5 6; do
	curl -s -o /dev/null --max-time 0.5 "http://127.0.0.1:$PORT$SLOW" &
	pids+=($!)
done
wait "${pids[@]}" || true # curl: 28, timed out
stamp "$T/c.left"
for _ in $(seq 300); do
	idle && break
	sleep 0.1
done
stamp "$T/c.idle"
idle || fail "the abandoned queries still hold the query threads after 30 s"
abandoned=$(curl -s "http://127.0.0.1:$PORT/metrics" | sed -n 's/^strata_queries_abandoned_total \([0-9]*\)/\1/p')
[ "$abandoned" = 6 ] || fail "strata_queries_abandoned_total ${abandoned:-none}, want 6"
# the query threads serve the next client as before (their bounds reset)
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/api/v1/profile?format=folded&from=$((now - 60))&to=$((now + 60))")
[ "$code" = 200 ] || fail "a query after the abandoned ones: HTTP $code"
python3 - "$T" <<'PY' || fail "the abandoned queries ran on"
import sys
t = sys.argv[1]
one = float(open(f"{t}/one_query_s").read())
freed = float(open(f"{t}/c.idle").read()) - float(open(f"{t}/c.left").read())
# run to their end, the two running would have held the threads for about
# one query's time after their clients left, and the four waiting as long
# again
assert freed < one / 2, f"threads free {freed:.2f} s after the clients left (a query: {one:.2f} s)"
print(f"ok: 6 abandoned queries counted; threads free {freed:.2f} s after the clients left (a query takes {one:.2f} s)")
PY
