#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Interop with librdmacm's rsocket API: rstream_rpeer runs one end of a
# scenario on rsocket/rconnect/rsend/rrecv/rshutdown/rclose (userspace
# rsockets, rdma-core 44) and the other on AF_RSTREAM, each in turn the
# server: 200,000 sends of 64 bytes (credit-only updates), half-close,
# close with data in flight, the peer closing under a blocked recv() and
# under a blocked send(); and 1 GiB checked, from the rsocket to
# AF_RSTREAM (less of both if the rig asks, see below).  What
# rstream(1) does not cover; see rstream_interop.sh.

. "$(dirname "$0")/lib.sh"

ADDR4=${RSTREAM_ADDR4:-192.0.2.1}
SCALE=${RSTREAM_TIME_SCALE:-1}
CASES=

RPEER=$DIR/rstream_rpeer

# rpeer <server api> <client api> <port> <scenario> <limit in s>
rpeer() {
	limit=$(($5 * SCALE))
	sout=/tmp/rpeer-server.$3
	"$RPEER" server "$1" "$ADDR4" "$3" "$4" "$limit" > "$sout" 2>&1 &
	spid=$!
	cout=$("$RPEER" client "$2" "$ADDR4" "$3" "$4" "$limit" 2>&1)
	crc=$?
	wait $spid
	src=$?
	[ $crc -eq 0 ] && [ $src -eq 0 ] ||
		die "$4: server ($1) exit $src: $(grep -v '^listening' "$sout")
client ($2) exit $crc: $cout"
	echo "server ($1): $(grep -v '^listening' "$sout")"
	[ -n "$cout" ] && echo "client ($2): $cout"
	return 0
}

# Full volume unless the rig asks for less (RSTREAM_VOLUME=reduced, which
# `make check` sets on every kernel but 6.12 unless RSTREAM_FULL=1: see
# the README): then the two volume
# scenarios run at a tenth (20,000 sends) and an eighth (128 MiB).  On the
# debug kernel 200,000 sends take about 75 s and 1 GiB about 300 s.
if [ "${RSTREAM_VOLUME:-full}" = reduced ]; then
	SMALL_SENDS=small_sends=20000
	VOLUME=mib=128
	VOLUME_NAME=rsocket_api_128_mib_kernel_serves
else
	SMALL_SENDS=small_sends
	VOLUME=gib
	VOLUME_NAME=rsocket_api_gib_kernel_serves
fi

port=7600
for scenario in $SMALL_SENDS half_close close_in_flight peer_closes_recv \
		peer_closes_send peer_aborts_recv peer_exits both_shut; do
	name=${scenario%%=*}
	for way in kernel_serves rsocket_serves; do
		port=$((port + 1))
		if [ $way = kernel_serves ]; then
			eval "rsocket_api_${name}_$way() { rpeer kernel rsocket $port $scenario 120; }"
		else
			eval "rsocket_api_${name}_$way() { rpeer rsocket kernel $port $scenario 120; }"
		fi
		CASES="$CASES rsocket_api_${name}_$way"
	done
done
# 1 GiB (128 MiB on the debug kernel), checked, from a userspace rsocket
# to AF_RSTREAM.
eval "$VOLUME_NAME() { rpeer kernel rsocket 7699 $VOLUME 600; }"
CASES="$CASES $VOLUME_NAME"

# An ordinary program under rdma-core's preload library: Debian's
# nc.traditional (plain SOCK_STREAM sockets, select(), read() and write(),
# all of which librspreload.so takes over) exchanges a 4 MiB file with
# rstream_rpeer on AF_RSTREAM, each in turn the server and each in turn
# the sender; the file that arrives must have the sender's SHA-256.
# (socat and nc.openbsd do not run under the preload: see the README.)
PRELOAD=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
FILE_IN=/tmp/preload-file.in

# -v: nc.traditional reports its own failures (a failed select() or
# getsockname() after accept) only when verbose, and otherwise exits 1
# with nothing on stderr, which is all a failure once seen on 6.12 left.
preload_nc() {
	LD_PRELOAD=$PRELOAD timeout "$((60 * SCALE))" nc.traditional -n -v "$@"
}

# same_file <received>: the received file is the one sent.
same_file() {
	want=$(sha256sum < "$FILE_IN")
	got=$(sha256sum < "$1")
	[ "$want" = "$got" ] ||
		die "SHA-256 of what came ($(wc -c < "$1") bytes): $got, sent: $want"
	echo "sha256 ${want%% *} on both ends"
}

# preload_file <port> <nc role: listen|connect> <nc direction: send|recv>
preload_file() {
	port=$1
	out=/tmp/preload-file.out.$port
	sout=/tmp/preload-server.$port
	# nc's messages apart from the bytes it receives
	nerr=/tmp/preload-nc-stderr.$port
	head -c 4194304 /dev/urandom > "$FILE_IN" 2>/dev/null ||
		die "no test file"
	rm -f "$out"
	# The sending nc shuts its side 1 s after the end of its input
	# (-q 1); the receiving one stops at the end of the stream.
	if [ "$3" = send ]; then
		ours=recv_file=$out
		nc_opts="-q 1"
		nc_in=$FILE_IN
		nc_out=/dev/null
	else
		ours=send_file=$FILE_IN
		nc_opts=
		nc_in=/dev/null
		nc_out=$out
	fi
	if [ "$2" = listen ]; then
		# shellcheck disable=SC2086 # the options are words
		preload_nc -l -p "$port" $nc_opts < "$nc_in" > "$nc_out" 2> "$nerr" &
		npid=$!
		cout=$("$RPEER" client kernel "$ADDR4" "$port" "$ours" \
		       "$((60 * SCALE))" 2>&1)
		crc=$?
		wait $npid
		nrc=$?
	else
		"$RPEER" server kernel "$ADDR4" "$port" "$ours" \
			"$((60 * SCALE))" > "$sout" 2>&1 &
		spid=$!
		# rstream_rpeer says "listening" once it listens.
		tries=0
		until grep -q listening "$sout"; do
			tries=$((tries + 1))
			[ $tries -lt 100 ] || break
			sleep 0.1
		done
		# shellcheck disable=SC2086 # the options are words
		preload_nc $nc_opts "$ADDR4" "$port" < "$nc_in" > "$nc_out" 2> "$nerr"
		nrc=$?
		wait $spid
		crc=$?
		cout=$(grep -v '^listening' "$sout")
	fi
	[ $crc -eq 0 ] && [ $nrc -eq 0 ] ||
		die "nc.traditional exit $nrc ($(cat "$nerr")), rstream_rpeer exit $crc: $cout"
	echo "AF_RSTREAM end: $cout"
	same_file "$out"
}

preload_nc_listens_and_receives() { preload_file 7681 listen recv; }
preload_nc_listens_and_sends() { preload_file 7682 listen send; }
preload_nc_connects_and_receives() { preload_file 7683 connect recv; }
preload_nc_connects_and_sends() { preload_file 7684 connect send; }
CASES="$CASES preload_nc_listens_and_receives preload_nc_listens_and_sends
preload_nc_connects_and_receives preload_nc_connects_and_sends"

# shellcheck disable=SC2086 # the case names are words
run_tests $CASES
