# Sourced by tests that need a real ClickHouse: ch_start runs a private
# clickhouse-server (Debian's package) from a config written into the
# test's temp dir, on a free loopback port, and waits until it answers;
# ch_stop (also run at exit) stops it.  No system service is touched.
# After ch_start: CH_URL=http://127.0.0.1:PORT, CH_PORT.  Skips (77) with
# a message only when clickhouse-server is not installed or cannot start.
CH_BIN=${CH_BIN:-/usr/sbin/clickhouse-server}
CH_PID=

ch_stop() {
	[ -n "$CH_PID" ] || return 0
	kill -TERM "$CH_PID" 2>/dev/null || true
	for _ in $(seq 1 100); do
		kill -0 "$CH_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$CH_PID" 2>/dev/null || true
	wait "$CH_PID" 2>/dev/null || true
	CH_PID=
}
trap 'ch_stop; rm -rf "$T"' EXIT

ch_write_config() { # $1: dir, $2: http port
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

ch_start() {
	[ -x "$CH_BIN" ] || skip "clickhouse-server not installed (make deps installs Debian's)"
	command -v curl >/dev/null || skip "curl missing"
	local dir=$T/clickhouse try
	for try in 1 2 3; do
		CH_PORT=$(ch_free_port) || skip "no free loopback port"
		ch_write_config "$dir" "$CH_PORT"
		"$CH_BIN" --config-file="$dir/config.xml" > "$dir/log/stdout" 2>&1 &
		CH_PID=$!
		CH_URL=http://127.0.0.1:$CH_PORT
		for _ in $(seq 1 300); do
			if [ "$(curl -s --max-time 1 "$CH_URL/ping" 2>/dev/null)" = "Ok." ]; then
				echo "clickhouse: $(curl -s "$CH_URL/" --data-binary "SELECT version()") on $CH_URL (pid $CH_PID)"
				return 0
			fi
			kill -0 "$CH_PID" 2>/dev/null || break
			sleep 0.1
		done
		echo "clickhouse: start $try failed:"
		tail -5 "$dir/log/error.log" "$dir/log/stdout" 2>/dev/null || true
		ch_stop
		rm -rf "$dir"
	done
	skip "clickhouse-server does not start here (logs above)"
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
	STRATA_TEST_CLICKHOUSE=$CH_URL "$bin" > "$T/$1.out" 2>&1 || { cat "$T/$1.out"; fail "$1 against ClickHouse"; }
	cat "$T/$1.out"
	grep -q 'SKIPPED' "$T/$1.out" && fail "$1: tests skipped although ClickHouse runs"
	echo "ok: $1 against $CH_URL"
}
