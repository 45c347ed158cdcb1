#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# rstream-run: unmodified TCP programs over AF_RSTREAM.  rstream(1) in its
# TCP mode (-T s, plain AF_INET sockets) and nc.traditional run with the
# preload library at one end, both or neither; every run checks its bytes
# (-T v: a running counter each way), and each case checks from
# rstream-run's own lines (-v) what each socket became: RDMA, TCP beside
# RDMA on a converted listener, or TCP after a fallback.  Then real
# programs, each checked for what it must output: iperf3, redis, nginx
# with curl, and memcached (libevent) with libmemcached's tools.

. "$(dirname "$0")/lib.sh"

ADDR=${RSTREAM_ADDR4:-192.0.2.1}
RUN=$DIR/rstream-run
RSTREAM_PRELOAD=$DIR/librstream-preload.so
export RSTREAM_PRELOAD
LIMIT=$((60 * ${RSTREAM_TIME_SCALE:-1}))
# 200 transfers of 64 KiB each way, checked.
XFER="-T s -T v -S 65536 -C 200"

# Until something listens on TCP port <port> (a converted listener's TCP
# side too), for up to 20 s: a client started earlier would be refused
# over RDMA and over TCP alike.
wait_listening() {
	hex=$(printf '%04X' "$1")
	i=0
	until cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
		awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 }
				  END { exit !f }'; do
		i=$((i + 1))
		[ $i -lt 200 ] || die "nothing listens on port $1: $(cat /tmp/run.server)"
		sleep 0.1
	done
}

# wait_converted <port> <log>: until rstream-run (-v) has said, in the
# server's <log>, what its listener on <port> became.  It says so once
# listen() returned, by which time the listener takes clients over RDMA and
# TCP alike.
wait_converted() {
	i=0
	until grep -q "rstream-run.*listen on port $1:" "$2"; do
		i=$((i + 1))
		[ $i -lt 200 ] || die "rstream-run never said what port $1 became: $(cat "$2")"
		sleep 0.1
	done
}

# pair <port> <server wrapper> <client wrapper>: an rstream(1) run, the
# server's and the client's rstream-run lines in /tmp/run.server and
# /tmp/run.client.  The wrappers are "$RUN [options]" or "" (plain).  The
# server listens on $ADDR, or on the wildcard address with BIND= set empty.
pair() {
	port=$1
	bind="-b $ADDR"
	[ "${BIND+set}" = set ] && bind=$BIND
	# shellcheck disable=SC2086 # the wrappers and options are words
	timeout "$LIMIT" $2 "$DIR/rstream" $XFER -p "$port" $bind \
		> /tmp/run.server 2>&1 &
	server=$!
	wait_listening "$port"
	[ -z "$2" ] || wait_converted "$port" /tmp/run.server
	# shellcheck disable=SC2086
	if ! timeout "$LIMIT" $3 "$DIR/rstream" $XFER -s "$ADDR" -p "$port" \
		> /tmp/run.client 2>&1; then
		kill $server 2>/dev/null
		die "client: $(tail -n 3 /tmp/run.client)"
	fi
	wait $server || die "server: $(tail -n 3 /tmp/run.server)"
	grep "rstream-run" /tmp/run.server /tmp/run.client | sed 's|/tmp/run.||'
}

said() {	# said <server|client> <text>: rstream-run said it
	grep -q "rstream-run.*$2" "/tmp/run.$1" ||
		die "the $1 did not say '$2': $(grep rstream-run "/tmp/run.$1")"
}

both_ends_over_rdma() {
	pair 20601 "$RUN -v" "$RUN -v"
	said server "listen on port 20601: RDMA and TCP"
	said client "connect to $ADDR:20601: RDMA"
}

# A wildcard listener listens on every RDMA device.  An iWARP device (siw0,
# on the debug kernel) listens in TCP's own port space, where the
# program's TCP listener already holds the port: rdma_listen() fails there
# and the listener stays TCP.  Without iWARP devices it is both.
wildcard_listener() {
	BIND=
	pair 20608 "$RUN -v" "$RUN -v"
	unset BIND
	if rdma link show siw0/1 >/dev/null 2>&1; then
		said server "listen on port 20608: TCP (Address already in use)"
		said client "connect to $ADDR:20608 over RDMA failed (Connection refused): TCP"
	else
		said server "listen on port 20608: RDMA and TCP"
		said client "connect to $ADDR:20608: RDMA"
	fi
}

# The server listens on TCP only: the RDMA connection is refused, and the
# client's own TCP socket connects instead.
client_falls_back_to_tcp() {
	pair 20602 "" "$RUN -v"
	said client "connect to $ADDR:20602 over RDMA failed (Connection refused): TCP"
}

# A plain TCP client reaches the converted listener on the same port.
tcp_client_reaches_converted_server() {
	pair 20603 "$RUN -v" ""
	said server "listen on port 20603: RDMA and TCP"
}

# Filters: a destination and a port the configuration does not name.
filters_keep_tcp() {
	pair 20604 "$RUN -v -l 1,2" "$RUN -v -c 198.51.100.0/24,:7"
	said server "listen on port 20604: TCP (not converted)"
	said client "connect to $ADDR:20604: TCP (not converted)"
	pair 20605 "$RUN -v -l 20605" "$RUN -v -c $ADDR/32:20605"
	said server "listen on port 20605: RDMA and TCP"
	said client "connect to $ADDR:20605: RDMA"
}

# Without the fallback, the refused RDMA connection is the program's error.
no_fallback_fails() {
	timeout "$LIMIT" "$DIR/rstream" -T s -p 20606 -b "$ADDR" \
		> /tmp/run.server 2>&1 &
	server=$!
	wait_listening 20606
	if timeout "$LIMIT" "$RUN" -v -n "$DIR/rstream" -T s -s "$ADDR" \
		-p 20606 > /tmp/run.client 2>&1; then
		kill $server
		die "connected without the fallback: $(cat /tmp/run.client)"
	fi
	kill $server
	wait $server 2>/dev/null
	said client "over RDMA failed: Connection refused"
}

# nc.traditional -e execs cat on the accepted socket: an AF_RSTREAM socket
# read and written through plain read() and write() by a program exec'd
# after the accept.
exec_server_echoes() {
	head -c 300000 /dev/urandom > /tmp/run.in
	timeout "$LIMIT" "$RUN" -v nc.traditional -l -s "$ADDR" -p 20607 -e /bin/cat \
		> /tmp/run.server 2>&1 &
	server=$!
	wait_listening 20607
	wait_converted 20607 /tmp/run.server
	# -q: the echo's time to come back after the input ends.
	timeout "$LIMIT" "$RUN" -v nc.traditional -q $((5 * ${RSTREAM_TIME_SCALE:-1})) \
		"$ADDR" 20607 < /tmp/run.in > /tmp/run.out 2> /tmp/run.client ||
		die "nc: $(cat /tmp/run.client)"
	wait $server
	said server "listen on port 20607: RDMA and TCP"
	said client "connect to $ADDR:20607: RDMA"
	cmp /tmp/run.in /tmp/run.out ||
		die "echoed $(wc -c < /tmp/run.out) bytes, not the 300000 sent"
}

# Real programs.  serve <port> <log> <wrapper> <program and args...>: the
# program in the background as the server, its output in <log>, $server
# its pid; returns once something listens on <port>.  A case that dies
# takes its server with it (each case is a subshell): a server left
# behind would hold the module after the suite.
serve() {
	port=$1
	log=$2
	wrap=$3
	shift 3
	# shellcheck disable=SC2086 # the wrapper is words
	timeout "$LIMIT" $wrap "$@" > "$log" 2>&1 &
	server=$!
	trap 'kill $server 2>/dev/null' EXIT
	wait_listening "$port"
	[ -z "$wrap" ] || wait_converted "$port" "$log"
}

# json_bytes <file> <key>: the "bytes" of iperf3's JSON object <key>.
json_bytes() {
	awk -v k="\"$2\":" '$1 == k { f = 1 }
			     f && $1 == "\"bytes\":" { sub(",", "", $2); print $2; exit }' "$1"
}

# iperf3 <port> <server wrapper> <client wrapper> [client options]: one
# iperf3 test of 16 MiB (-n); the client must send them all, the server
# receive some and no more, and neither may report an error (iperf3 reads
# TCP_INFO, sets TCP_NODELAY and SO_SNDBUF on its sockets).  The server
# stops counting when the client says the test is over, so what is still
# in flight then is not in its count: on the debug kernel over plain TCP
# it counted 12189696 of 16777216 bytes.  iperf3 does not check what the
# bytes are: the other cases do.
IPERF_BYTES=16777216
iperf3_run() {
	port=$1
	serve "$port" /tmp/run.server "$2" iperf3 -s -1 -B "$ADDR" -p "$port"
	# shellcheck disable=SC2086
	timeout "$LIMIT" $3 iperf3 -c "$ADDR" -p "$port" -n $IPERF_BYTES -J $4 \
		> /tmp/run.json 2> /tmp/run.client ||
		die "iperf3 client: $(grep error /tmp/run.json) $(cat /tmp/run.client)"
	wait $server || die "iperf3 server: $(tail -n 5 /tmp/run.server)"
	sent=$(json_bytes /tmp/run.json sum_sent)
	got=$(json_bytes /tmp/run.json sum_received)
	if [ "${sent:-0}" -lt $IPERF_BYTES ] || [ "${got:-0}" -le 0 ] ||
	   [ "$got" -gt "$sent" ]; then
		die "iperf3 sent ${sent:-nothing}, the server got ${got:-nothing}"
	fi
	if grep -qi "error\|warning" /tmp/run.server /tmp/run.json; then
		die "iperf3 complained: $(grep -hi "error\|warning" /tmp/run.server /tmp/run.json)"
	fi
	echo "iperf3 $4: $sent bytes sent, $got counted, $(awk '$1 == "\"bits_per_second\":" { b = $2 }
		END { printf "%.2f Gb/s", b / 1e9 }' /tmp/run.json)"
}

# One stream, then four (-P 4: five connections on one listener, the
# control one and four data streams, which iperf3's server waits for on
# one select()), then one with -Z.
iperf3_over_rdma() {
	iperf3_run 20610 "$RUN -v" "$RUN -v" ""
	said server "listen on port 20610: RDMA and TCP"
	said client "connect to $ADDR:20610: RDMA"
	[ "$(grep -c "connect to.*: RDMA" /tmp/run.client)" = 2 ] ||
		die "iperf3 -P 1 made other than 2 RDMA connections: $(cat /tmp/run.client)"
	iperf3_run 20611 "$RUN -v" "$RUN -v" "-P 4"
	[ "$(grep -c "connect to.*: RDMA" /tmp/run.client)" = 5 ] ||
		die "iperf3 -P 4 made other than 5 RDMA connections: $(cat /tmp/run.client)"
	# -Z: iperf3's "zero copy" sends, sendfile() from its file.
	iperf3_run 20613 "$RUN -v" "$RUN -v" "-Z"
	[ "$(grep -c "connect to.*: RDMA" /tmp/run.client)" = 2 ] ||
		die "iperf3 -Z made other than 2 RDMA connections: $(cat /tmp/run.client)"
}

# The client converted, the server plain TCP: every connection falls back.
iperf3_client_falls_back() {
	iperf3_run 20612 "" "$RUN -v" "-P 4"
	[ "$(grep -c "over RDMA failed (Connection refused): TCP" /tmp/run.client)" = 5 ] ||
		die "not 5 fallbacks: $(cat /tmp/run.client)"
}

# redis-server (an event-loop server that sets TCP_NODELAY and the
# keepalive options on what it accepts): a SET then a GET of a 4 KiB value
# through redis-cli, then redis-benchmark with 4 clients; a plain TCP
# redis-cli and redis-benchmark reach the same converted server.
redis_set_get_and_benchmark() {
	serve 20620 /tmp/run.server "$RUN -v" redis-server --bind "$ADDR" \
		--port 20620 --save "" --appendonly no --protected-mode no \
		--dir /tmp --logfile /tmp/run.redis
	value=$(head -c 3072 /dev/urandom | base64 -w 0)
	cli="redis-cli -h $ADDR -p 20620"
	# shellcheck disable=SC2086 # the commands are words
	r=$($RUN -v $cli SET key "$value" 2> /tmp/run.client)
	[ "$r" = OK ] || die "SET: $r $(cat /tmp/run.client)"
	said client "connect to $ADDR:20620: RDMA"
	# shellcheck disable=SC2086
	r=$($RUN $cli GET key)
	[ "$r" = "$value" ] || die "GET returned ${#r} bytes, not the value SET"
	# shellcheck disable=SC2086
	r=$($cli STRLEN key)
	[ "$r" = 4096 ] || die "plain TCP STRLEN: $r"
	# The benchmark over RDMA, then over TCP into the same listener.
	for how in RDMA TCP; do
		wrap=
		[ $how = RDMA ] && wrap=$RUN
		# shellcheck disable=SC2086
		timeout "$LIMIT" $wrap redis-benchmark -h "$ADDR" -p 20620 -q \
			-n 2000 -c 4 -t set,get > /tmp/run.out 2>&1 ||
			die "redis-benchmark: $(tail -n 3 /tmp/run.out)"
		# -q rewrites its line with \r as it goes.
		tr '\r' '\n' < /tmp/run.out > /tmp/run.bench
		for t in SET GET; do
			grep -q "^$t: [0-9.]* requests per second, p50=" \
				/tmp/run.bench ||
				die "redis-benchmark: no $t figure: $(cat /tmp/run.bench)"
		done
		grep "requests per second" /tmp/run.bench | sed "s/^/$how: /"
	done
	# shellcheck disable=SC2086
	$cli SHUTDOWN NOSAVE > /dev/null 2>&1
	wait $server
	said server "listen on port 20620: RDMA and TCP"
	if grep -i "error\|setsockopt\|keepalive" /tmp/run.redis; then
		die "redis-server complained"
	fi
}

# nginx: a master that forks workers, each waiting in epoll on the
# inherited listener, serving a 3 MB file with sendfile() to curl, which
# sets TCP_NODELAY and the keepalive options; the body must be the file.
# Then a plain TCP curl from the same listener.
# nginx_setup <blob bytes> <http lines> <listen>: nginx's files in $ng,
# two workers, a blob of that size to serve, and the server started.
nginx_setup() {
	ng=/tmp/run.nginx
	rm -rf $ng
	mkdir -p $ng/www
	head -c "$1" /dev/urandom > $ng/www/blob
	cat > $ng/nginx.conf <<-EOF
		user root;
		worker_processes 2;
		daemon off;
		pid $ng/nginx.pid;
		error_log $ng/error.log info;
		events { worker_connections 64; }
		http {
			$2
			client_body_temp_path $ng/body;
			proxy_temp_path $ng/proxy;
			fastcgi_temp_path $ng/fastcgi;
			uwsgi_temp_path $ng/uwsgi;
			scgi_temp_path $ng/scgi;
			server { listen $3; root $ng/www; }
		}
	EOF
}

nginx_serves_curl() {
	nginx_setup 3000000 "access_log /tmp/run.nginx/access.log; sendfile on; tcp_nopush on;" \
		"$ADDR:20630"
	serve 20630 /tmp/run.server "$RUN -v" nginx -e $ng/error.log -p $ng \
		-c $ng/nginx.conf
	for wrap in "$RUN -v" ""; do
		# shellcheck disable=SC2086
		timeout "$LIMIT" $wrap curl -sS -o $ng/got \
			"http://$ADDR:20630/blob" 2> /tmp/run.client ||
			die "curl ($wrap): $(cat /tmp/run.client)"
		cmp $ng/www/blob $ng/got ||
			die "curl ($wrap) got $(wc -c < $ng/got) bytes, not the file"
		grep -v rstream-run /tmp/run.client && die "curl complained"
		[ -z "$wrap" ] || said client "connect to $ADDR:20630: RDMA"
	done
	kill "$(cat $ng/nginx.pid)"
	wait $server
	said server "listen on port 20630: RDMA and TCP"
	if grep "\[\(warn\|error\|crit\|alert\|emerg\)\]" $ng/error.log; then
		die "nginx complained"
	fi
}

# nginx with "reuseport": a listener of its own per worker, all on one
# port with SO_REUSEPORT, which the socket core refuses to AF_RSTREAM.
# rstream-run makes it RSTREAM_REUSEPORT, TCP's SO_REUSEPORT: the
# listeners share the TCP clients as TCP's do, and since rdma_cm gives a
# port to one listener, the first also listens on RDMA and the other on
# TCP alone.  Both workers must serve some of the plain curls, the
# converted ones go over RDMA, and each must get the file.
nginx_reuseport_workers() {
	# shellcheck disable=SC2016 # nginx's variables, not the shell's
	nginx_setup 100000 'log_format worker "$pid $status"; access_log /tmp/run.nginx/access.log worker;' \
		"$ADDR:20631 reuseport"
	serve 20631 /tmp/run.server "$RUN -v" nginx -e $ng/error.log -p $ng \
		-c $ng/nginx.conf
	for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18; do
		wrap=
		[ $i -gt 16 ] && wrap="$RUN -v"
		# shellcheck disable=SC2086 # the wrapper is words
		timeout "$LIMIT" $wrap curl -sS -o $ng/got \
			"http://$ADDR:20631/blob" 2> /tmp/run.client ||
			die "curl $i ($wrap): $(cat /tmp/run.client)"
		cmp $ng/www/blob $ng/got ||
			die "curl $i ($wrap) got $(wc -c < $ng/got) bytes, not the file"
	done
	said client "connect to $ADDR:20631: RDMA"
	kill "$(cat $ng/nginx.pid)"
	wait $server
	# nginx calls listen() on each socket twice (the second sets the
	# backlog): as many lines of each kind, and no other.
	both=$(grep -c "listen on port 20631: RDMA and TCP" /tmp/run.server)
	tcp=$(grep -c "listen on port 20631: TCP (Address already in use)" \
		/tmp/run.server)
	all=$(grep -c "listen on port 20631:" /tmp/run.server)
	if [ "$both" = 0 ] || [ "$both" != "$tcp" ] ||
	   [ $((both + tcp)) != "$all" ]; then
		die "not one listener on RDMA and TCP, one on TCP: $(grep rstream-run /tmp/run.server)"
	fi
	if grep "\[\(warn\|error\|crit\|alert\|emerg\)\]" $ng/error.log; then
		die "nginx complained"
	fi
	[ "$(awk '$2 == 200 { print $1 }' $ng/access.log | sort -u | wc -l)" = 2 ] ||
		die "not both workers served: $(sort $ng/access.log | uniq -c)"
	awk '{ n[$1]++ } END { for (p in n) printf "worker %s served %d\n", p, n[p] }' \
		$ng/access.log
}

# memcached: libevent's event loop on worker threads, a listener made
# nonblocking by fcntl() before listen() and watched from before it listens.
# libmemcached's memccp and memccat store and read back a file over RDMA
# (-n: RDMA or nothing, since they never say how their nonblocking
# connects ended) and over plain TCP into the same converted server;
# memcslap loads it.
memcached_stores_and_reads() {
	mc=/tmp/run.memcached
	rm -rf $mc
	mkdir -p $mc
	head -c 200000 /dev/urandom > $mc/blob
	# memccat ends what it prints with a newline.
	{ cat $mc/blob; echo; } > $mc/want
	serve 20640 /tmp/run.server "$RUN -v" memcached -U 0 -u root -t 2 \
		-l "$ADDR" -p 20640 -m 16 -vv
	servers="--servers=$ADDR:20640"
	for wrap in "$RUN -n" ""; do
		# shellcheck disable=SC2086 # the wrapper is words
		(cd $mc && timeout "$LIMIT" $wrap memccp $servers blob) \
			2> /tmp/run.client || die "memccp ($wrap): $(cat /tmp/run.client)"
		# shellcheck disable=SC2086
		timeout "$LIMIT" $wrap memccat $servers blob > $mc/got \
			2>> /tmp/run.client ||
			die "memccat ($wrap): $(cat /tmp/run.client)"
		cmp $mc/want $mc/got ||
			die "memccat ($wrap) got $(wc -c < $mc/got) bytes, not the file"
	done
	# shellcheck disable=SC2086
	timeout "$LIMIT" "$RUN" memcslap $servers --concurrency=4 \
		--execute-number=500 > /tmp/run.out 2>&1 ||
		die "memcslap: $(tail -n 5 /tmp/run.out)"
	grep -q "Time total: *[0-9.]* seconds" /tmp/run.out ||
		die "memcslap: no total: $(cat /tmp/run.out)"
	grep "Time to set\|Time total" /tmp/run.out | tr -s ' '
	kill $server
	wait $server
	said server "listen on port 20640: RDMA and TCP"
	if grep -i "error\|failed" /tmp/run.server; then
		die "memcached complained"
	fi
}

run_tests both_ends_over_rdma wildcard_listener client_falls_back_to_tcp \
	tcp_client_reaches_converted_server filters_keep_tcp no_fallback_fails \
	exec_server_echoes iperf3_over_rdma iperf3_client_falls_back \
	redis_set_get_and_benchmark nginx_serves_curl nginx_reuseport_workers \
	memcached_stores_and_reads
