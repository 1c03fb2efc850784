# Sourced by tests that need a real ClickHouse: ch_start runs a private
# clickhouse-server (Debian's package) from a config written into the
# test's temp dir, on a free loopback port, and waits until it answers;
# ch_stop (also run at exit) stops it.  No system service is touched.
# After ch_start: CH_URL=http://127.0.0.1:PORT, CH_PORT.  Skips (77) with
# a message only when clickhouse-server is not installed or cannot start.
#
# With CH_SHARDS=2 in the environment, ch_start starts a cluster instead:
# two servers (shards), each with the cluster in its remote_servers
# (CH_CLUSTER names it); CH_URL/CH_PORT are the first's, CH_HOSTS lists
# every server's HOST:PORT (comma-separated), and CH_STORE_HOSTS and
# CH_STORE_QUERY are what a store spec needs:
# clickhouse://$CH_STORE_HOSTS/DB$CH_STORE_QUERY (docs/server.md).
CH_BIN=${CH_BIN:-/usr/sbin/clickhouse-server}
CH_SHARDS=${CH_SHARDS:-1}
CH_CLUSTER=strata_test
CH_PID=
CH_PIDS=()

ch_stop_pid() {
	kill -TERM "$1" 2>/dev/null || true
	for _ in $(seq 1 100); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

ch_stop() {
	local p
	for p in "${CH_PIDS[@]}"; do ch_stop_pid "$p"; done
	CH_PIDS=()
	CH_PID=
}
trap 'ch_stop; rm -rf "$T"' EXIT

# $1: dir, $2: http port; for a cluster, $3: tcp port, $4: the
# remote_servers XML
ch_write_config() {
	mkdir -p "$1/data" "$1/tmp" "$1/user_files" "$1/format_schemas" "$1/log"
	cat > "$1/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <logger>
    <level>warning</level>
    <log>$1/log/server.log</log>
    <errorlog>$1/log/error.log</errorlog>
    <size>10M</size>
    <count>1</count>
  </logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>$2</http_port>
${3:+<tcp_port>$3</tcp_port>}
${4:-}
  <path>$1/data/</path>
  <tmp_path>$1/tmp/</tmp_path>
  <user_files_path>$1/user_files/</user_files_path>
  <format_schema_path>$1/format_schemas/</format_schema_path>
  <users_config>$1/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>67108864</mark_cache_size>
  <uncompressed_cache_size>67108864</uncompressed_cache_size>
  <timezone>UTC</timezone>
</yandex>
XML
	cat > "$1/users.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
    <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time>
  </interval></default></quotas>
</yandex>
XML
}

# A port nothing listens on now (the server may still lose a race for it:
# ch_start then tries another).
ch_free_port() {
	local p
	for _ in $(seq 1 50); do
		p=$((20000 + RANDOM % 20000))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
	return 1
}

# ch_start_one DIR HTTP_PORT [TCP_PORT CLUSTER_XML]: 0 once it answers
# (CH_PID, CH_URL set), 1 if it did not start (logs shown).
ch_start_one() {
	local dir=$1 url=http://127.0.0.1:$2
	ch_write_config "$@"
	"$CH_BIN" --config-file="$dir/config.xml" > "$dir/log/stdout" 2>&1 &
	CH_PID=$!
	for _ in $(seq 1 300); do
		if [ "$(curl -s --max-time 1 "$url/ping" 2>/dev/null)" = "Ok." ]; then
			CH_PIDS+=("$CH_PID")
			echo "clickhouse: $(curl -s "$url/" --data-binary "SELECT version()") on $url (pid $CH_PID)"
			return 0
		fi
		kill -0 "$CH_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "clickhouse: start of $dir failed:"
	tail -5 "$dir/log/error.log" "$dir/log/stdout" 2>/dev/null || true
	ch_stop_pid "$CH_PID"
	rm -rf "$dir"
	return 1
}

ch_start() {
	[ -x "$CH_BIN" ] || skip "clickhouse-server not installed (make deps installs Debian's)"
	command -v curl >/dev/null || skip "curl missing"
	[ "$CH_SHARDS" -gt 1 ] && { ch_start_cluster; return; }
	for _ in 1 2 3; do
		CH_PORT=$(ch_free_port) || skip "no free loopback port"
		if ch_start_one "$T/clickhouse" "$CH_PORT"; then
			CH_URL=http://127.0.0.1:$CH_PORT CH_HOSTS=127.0.0.1:$CH_PORT
			CH_STORE_HOSTS=$CH_HOSTS CH_STORE_QUERY=
			return 0
		fi
	done
	skip "clickhouse-server does not start here (logs above)"
}

# CH_SHARDS servers, one shard each, of cluster CH_CLUSTER; the Distributed
# tables reach them by their native (TCP) ports.
ch_start_cluster() {
	local i xml http=() tcp=()
	for _ in 1 2 3; do
		http=() tcp=()
		xml="<remote_servers><$CH_CLUSTER>"
		for i in $(seq 1 "$CH_SHARDS"); do
			http+=("$(ch_free_port)") || skip "no free loopback port"
			tcp+=("$(ch_free_port)") || skip "no free loopback port"
			xml+="<shard><replica><host>127.0.0.1</host><port>${tcp[-1]}</port></replica></shard>"
		done
		xml+="</$CH_CLUSTER></remote_servers>"
		CH_PIDS=()
		for i in $(seq 0 $((CH_SHARDS - 1))); do
			ch_start_one "$T/clickhouse$i" "${http[$i]}" "${tcp[$i]}" "$xml" || break
		done
		if [ "${#CH_PIDS[@]}" -eq "$CH_SHARDS" ]; then
			CH_PORT=${http[0]} CH_URL=http://127.0.0.1:${http[0]} CH_PID=${CH_PIDS[0]}
			CH_HOSTS=$(printf '127.0.0.1:%s,' "${http[@]}")
			CH_HOSTS=${CH_HOSTS%,}
			CH_STORE_HOSTS=$CH_HOSTS CH_STORE_QUERY="?cluster=$CH_CLUSTER"
			echo "clickhouse: cluster $CH_CLUSTER of $CH_SHARDS shards: $CH_HOSTS"
			return 0
		fi
		ch_stop
	done
	skip "clickhouse-server cluster does not start here (logs above)"
}

# ch_query SQL: runs one statement, prints the result, fails on an error.
ch_query() {
	local out code
	out=$(curl -sS --max-time 30 -w '\n%{http_code}' "$CH_URL/" --data-binary "$1") ||
		fail "clickhouse: curl failed for: $1"
	code=${out##*$'\n'}
	out=${out%$'\n'*}
	[ "$code" = 200 ] || fail "clickhouse: HTTP $code for: $1: $out"
	printf '%s' "$out"
}

# ch_run_unit NAME: runs build/tests/NAME (a cmocka program that reads
# STRATA_TEST_CLICKHOUSE) against the running server; every test must run.
ch_run_unit() {
	local bin=$ROOT/build/tests/$1
	[ -x "$bin" ] || fail "$bin not built (make unit)"
	STRATA_TEST_CLICKHOUSE=$CH_URL STRATA_TEST_CLICKHOUSE_HOSTS=$CH_STORE_HOSTS \
		STRATA_TEST_CLICKHOUSE_QUERY=$CH_STORE_QUERY "$bin" > "$T/$1.out" 2>&1 || { cat "$T/$1.out"; fail "$1 against ClickHouse"; }
	cat "$T/$1.out"
	grep -q 'SKIPPED' "$T/$1.out" && fail "$1: tests skipped although ClickHouse runs"
	echo "ok: $1 against $CH_URL"
}
