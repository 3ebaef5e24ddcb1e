#!/bin/bash
# A two-shard ClickHouse cluster on 127.0.0.1 for tests and benchmarks: two plain
# clickhouse-server processes (Debian's package), each with its config, data and logs
# under DIR/shardN, on free ports; the cluster `memprofd` lists both, so a Distributed
# table created on either spreads over both. Never touches /etc or /var/lib/clickhouse.
#   local-cluster.sh start DIR   # prints the first shard's HTTP URL on its last line
#   local-cluster.sh stop DIR    # stops both (the pids in DIR/shardN/pid)
# start applies schema.sql on both; starting DIR again keeps its data (new ports).
set -euo pipefail

START_TIMEOUT_S=60         # a server that does not answer /ping by then is an error
STOP_TIMEOUT_S=20          # SIGTERM, then SIGKILL after this long
SHARDS=2

HERE=$(cd "$(dirname "$0")" && pwd)

die() { echo "local-cluster.sh: $*" >&2; exit 1; }

server_bin() {
	for b in /usr/bin/clickhouse-server /usr/sbin/clickhouse-server /usr/bin/clickhouse; do
		[ -x "$b" ] && { echo "$b"; return; }
	done
	die "clickhouse-server not found: install the Debian package clickhouse-server"
}

# A TCP port nothing listens on now (bind to 0 and read it back).
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

write_config() {    # dir http tcp; the remote_servers block is in DIR/cluster.xml
	local d=$1 http=$2 tcp=$3
	mkdir -p "$d/data" "$d/tmp" "$d/user_files" "$d/log"
	cat > "$d/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
    <logger><level>warning</level><log>$d/log/server.log</log>
        <errorlog>$d/log/server.err.log</errorlog><size>10M</size><count>2</count></logger>
    <listen_host>127.0.0.1</listen_host>
    <http_port>$http</http_port>
    <tcp_port>$tcp</tcp_port>
    <max_concurrent_queries>100</max_concurrent_queries>
    <mark_cache_size>268435456</mark_cache_size>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <path>$d/data/</path>
    <tmp_path>$d/tmp/</tmp_path>
    <user_files_path>$d/user_files/</user_files_path>
    <users_config>$d/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <include_from>$(dirname "$d")/cluster.xml</include_from>
    <remote_servers incl="clickhouse_remote_servers"/>
</yandex>
XML
	cat > "$d/users.xml" <<XML
<?xml version="1.0"?>
<yandex>
    <profiles><default><max_memory_usage>4000000000</max_memory_usage>
        <load_balancing>in_order</load_balancing></default></profiles>
    <users><default><password></password>
        <networks replace="replace"><ip>127.0.0.1</ip></networks>
        <profile>default</profile><quota>default</quota></default></users>
    <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
        <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time>
    </interval></default></quotas>
</yandex>
XML
}

# Runs schema.sql's statements (';' at a line's end ends one; '--' lines are comments)
# one by one on the node at URL; the first failure is printed and ends it.
apply_schema() {
	local url=$1 stmt="" line
	while IFS= read -r line; do
		case "$line" in --*) continue ;; esac
		stmt+="$line"$'\n'
		if [[ "$line" == *";" ]]; then
			curl -sS --fail-with-body --max-time 60 "$url" --data-binary "${stmt%;*}" >&2 || return 1
			stmt=""
		fi
	done < "$HERE/schema.sql"
}

start() {
	local dir=$1 bin tcps=() https=()
	bin=$(server_bin)
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	for i in $(seq 1 $SHARDS); do
		[ -f "$dir/shard$i/pid" ] && kill -0 "$(cat "$dir/shard$i/pid")" 2>/dev/null &&
			die "$dir: shard $i already runs (pid $(cat "$dir/shard$i/pid")); stop it first"
		https[$i]=$(free_port)
		tcps[$i]=$(free_port)
		while [ "${tcps[$i]}" = "${https[$i]}" ]; do tcps[$i]=$(free_port); done
	done
	{
		echo '<?xml version="1.0"?>'
		echo '<yandex><clickhouse_remote_servers><memprofd>'
		for i in $(seq 1 $SHARDS); do
			echo "<shard><replica><host>127.0.0.1</host><port>${tcps[$i]}</port></replica></shard>"
		done
		echo '</memprofd></clickhouse_remote_servers></yandex>'
	} > "$dir/cluster.xml"
	for i in $(seq 1 $SHARDS); do
		write_config "$dir/shard$i" "${https[$i]}" "${tcps[$i]}"
		echo "http://127.0.0.1:${https[$i]}/" > "$dir/shard$i/url"
		(cd "$dir/shard$i" && exec setsid "$bin" --config-file="$dir/shard$i/config.xml" \
			>"$dir/shard$i/log/stdout.log" 2>&1 </dev/null) &
		echo $! > "$dir/shard$i/pid"
	done
	for i in $(seq 1 $SHARDS); do
		local url deadline=$((SECONDS + START_TIMEOUT_S))
		url=$(cat "$dir/shard$i/url")
		until curl -sf --max-time 2 "${url}ping" >/dev/null 2>&1; do
			kill -0 "$(cat "$dir/shard$i/pid")" 2>/dev/null ||
				die "shard $i exited at start: $(tail -n 3 "$dir/shard$i/log/server.err.log" 2>/dev/null | tr '\n' ' ')"
			[ $SECONDS -lt "$deadline" ] || die "shard $i did not answer ${url}ping within ${START_TIMEOUT_S} s"
			sleep 0.2
		done
	done
	for i in $(seq 1 $SHARDS); do
		apply_schema "$(cat "$dir/shard$i/url")" || die "shard $i: applying $HERE/schema.sql failed"
	done
	cat "$dir/shard1/url"
}

stop() {
	local dir=$1 pid
	for i in $(seq 1 $SHARDS); do
		[ -f "$dir/shard$i/pid" ] || continue
		pid=$(cat "$dir/shard$i/pid")
		if kill -0 "$pid" 2>/dev/null; then
			kill -TERM "$pid"
			local deadline=$((SECONDS + STOP_TIMEOUT_S))
			while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt "$deadline" ]; do sleep 0.2; done
			kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
		fi
		rm -f "$dir/shard$i/pid"
	done
}

case "${1:-}" in
start) [ $# -eq 2 ] || die "usage: local-cluster.sh start DIR"; start "$2" ;;
stop) [ $# -eq 2 ] || die "usage: local-cluster.sh stop DIR"; stop "$2" ;;
*) echo "usage: local-cluster.sh start|stop DIR" >&2; exit 2 ;;
esac
