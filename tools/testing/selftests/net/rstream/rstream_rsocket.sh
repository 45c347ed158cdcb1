#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Interop with librdmacm's rsocket API: rstream_rpeer runs one end of a
# scenario on rsocket/rconnect/rsend/rrecv/rshutdown/rclose (userspace
# rsockets, rdma-core 44) and the other on AF_RSTREAM, each in turn the
# server: 200,000 sends of 64 bytes (credit-only updates), half-close,
# close with data in flight, the peer closing under a blocked recv() and
# under a blocked send(); and 1 GiB checked, from the rsocket to
# AF_RSTREAM.  What rstream(1) does not cover; see rstream_interop.sh.

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

port=7600
for scenario in small_sends half_close close_in_flight peer_closes_recv \
		peer_closes_send; do
	for way in kernel_serves rsocket_serves; do
		port=$((port + 1))
		if [ $way = kernel_serves ]; then
			eval "rsocket_api_${scenario}_$way() { rpeer kernel rsocket $port $scenario 120; }"
		else
			eval "rsocket_api_${scenario}_$way() { rpeer rsocket kernel $port $scenario 120; }"
		fi
		CASES="$CASES rsocket_api_${scenario}_$way"
	done
done
# 1 GiB, checked, from a userspace rsocket to AF_RSTREAM.
rsocket_api_gib_kernel_serves() { rpeer kernel rsocket 7699 gib 600; }
CASES="$CASES rsocket_api_gib_kernel_serves"

# shellcheck disable=SC2086 # the case names are words
run_tests $CASES
