#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The two-host rig checks itself: both guests' rstream sees rxe0, and
# rdma-core's rsockets move verified data across the wire between the two
# soft-RoCE devices, over IPv4 and IPv6.  Runs on both guests at once:
# RSTREAM_ROLE a serves, b connects.

. /usr/lib/rstream/selftests/ktap_helpers.sh

# A byte-verified custom run (-T v); custom runs give a real exit status.
RSTREAM_ARGS="-S 65536 -C 20 -I 2 -T v"

barrier() {	# barrier <port>: both guests get past it together
	if [ "$RSTREAM_ROLE" = a ]; then
		echo go | nc -l -p "$1" > /dev/null
	else
		until nc "$RSTREAM_PEER4" "$1" < /dev/null 2>/dev/null |
		      grep -q go; do
			sleep 0.2
		done
	fi
}

rstream_sees_rxe0() {
	grep -qx "rxe0 1 roce" /proc/net/rstream/devices
}

# rsockets <ip|ipv6> <server address>: a serves, b connects once a listens
rsockets() {
	if [ "$RSTREAM_ROLE" = a ]; then
		# shellcheck disable=SC2086
		rstream -f "$1" -b "$2" $RSTREAM_ARGS > /tmp/wire.out 2>&1 &
		pid=$!
		i=0
		until rdma res show cm_id | grep -q "state LISTEN .*:7471 "; do
			i=$((i + 1))
			if [ $i -gt 100 ]; then
				echo "# no rsockets listener on port 7471"
				kill $pid
				barrier 9101
				return 1
			fi
			sleep 0.1
		done
		barrier 9101
		wait $pid
	else
		barrier 9101
		# shellcheck disable=SC2086
		rstream -s "$2" -f "$1" $RSTREAM_ARGS > /tmp/wire.out 2>&1
	fi
	rc=$?
	sed 's/^/# /' /tmp/wire.out
	return $rc
}

rsockets_ipv4() {
	if [ "$RSTREAM_ROLE" = a ]; then
		rsockets ip "$RSTREAM_ADDR4"
	else
		rsockets ip "$RSTREAM_PEER4"
	fi
}

rsockets_ipv6() {
	if [ "$RSTREAM_ROLE" = a ]; then
		rsockets ipv6 "$RSTREAM_ADDR6"
	else
		rsockets ipv6 "$RSTREAM_PEER6"
	fi
}

ktap_print_header
ktap_set_plan 3
ktap_test_result "rstream sees rxe0" rstream_sees_rxe0
ktap_test_result "rsockets over IPv4 across the wire" rsockets_ipv4
ktap_test_result "rsockets over IPv6 across the wire" rsockets_ipv6
barrier 9102
ktap_finished
