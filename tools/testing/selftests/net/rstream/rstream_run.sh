#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# rstream-run: unmodified TCP programs over AF_RSTREAM.  rstream(1) in its
# TCP mode (-T s, plain AF_INET sockets) and nc.traditional run with the
# preload library at one end, both or neither; every run checks its bytes
# (-T v: a running counter each way), and each case checks from
# rstream-run's own lines (-v) what each socket became: RDMA, TCP beside
# RDMA on a converted listener, or TCP after a fallback.

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

run_tests both_ends_over_rdma wildcard_listener client_falls_back_to_tcp \
	tcp_client_reaches_converted_server filters_keep_tcp no_fallback_fails \
	exec_server_echoes
