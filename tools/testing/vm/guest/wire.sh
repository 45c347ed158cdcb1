#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Two hosts: both guests' rstream sees rxe0; rdma-core's rsockets move
# verified data across the wire between the two soft-RoCE devices (the rig
# checking itself); AF_RSTREAM moves verified data between the two kernels
# over IPv4 and IPv6; and a userspace rsocket talks to AF_RSTREAM each way.
# Runs on both guests at once: RSTREAM_ROLE a serves, b connects.

. /usr/lib/rstream/selftests/ktap_helpers.sh

# A byte-verified custom run (-T v); custom runs give a real exit status.
RSTREAM_ARGS="-S 65536 -C 20 -I 2 -T v"
SCALE=${RSTREAM_TIME_SCALE:-1}
# rdma-core's tool waits for ever on a peer that went away (once, in CI,
# the server died of a segmentation fault and the client waited until the
# suite's limit): each run is bounded, 8 to 14 s on the debug kernel.
RSOCKETS_LIMIT=$((60 * SCALE))

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
		timeout "$RSOCKETS_LIMIT" rstream -f "$1" -b "$2" $RSTREAM_ARGS \
			> /tmp/wire.out 2>&1 &
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
		timeout "$RSOCKETS_LIMIT" rstream -s "$2" -f "$1" $RSTREAM_ARGS \
			> /tmp/wire.out 2>&1
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

ST=/usr/lib/rstream/selftests

# xfer <port> <v4|v6> <server options> -- <client options>: AF_RSTREAM
# between the two kernels, every byte checked; a serves, b connects.
xfer() {
	port=$1
	if [ "$2" = v6 ]; then
		server=$RSTREAM_ADDR6 peer=$RSTREAM_PEER6
	else
		server=$RSTREAM_ADDR4 peer=$RSTREAM_PEER4
	fi
	shift 2
	sopts=
	while [ "$1" != -- ]; do
		sopts="$sopts $1"
		shift
	done
	shift
	limit=$((120 * SCALE))
	barrier "$port"
	if [ "$RSTREAM_ROLE" = a ]; then
		# shellcheck disable=SC2086
		"$ST/rstream_xfer" server "$server" "$port" -T "$limit" $sopts
	else
		"$ST/rstream_xfer" client "$peer" "$port" -T "$limit" "$@"
	fi
	rc=$?
	# The device's view of a failed transfer: retries, duplicates and
	# sequence errors on each side tell a lost or replayed packet.
	if [ $rc -ne 0 ]; then
		rdma statistic show link rxe0/1 | sed 's/^/# /'
	fi
	return $rc
}

# The volume in full where the rig asks for it (RSTREAM_VOLUME, as for
# the loopback suites: 6.12); on 6.1 the same cases move less (the debug
# kernel's pair runs no wire cases).
if [ "${RSTREAM_VOLUME:-full}" = reduced ]; then
	TINY_SENDS=2 BIG_SENDS=1 SMALL_SENDS=2000
else
	TINY_SENDS=8 BIG_SENDS=4 SMALL_SENDS=20000
fi

kernel_ipv4_both_ways() { xfer 9111 v4 -- -s 65537 -n 64 -d; }
kernel_ipv6_both_ways() { xfer 9112 v6 -- -s 65537 -n 64 -d; }
kernel_ipv4_tiny_buffers() { xfer 9113 v4 -b 4096 -- -s 1048576 -n $TINY_SENDS -d; }
kernel_ipv4_8m_sends() { xfer 9114 v4 -- -s 8388608 -n $BIG_SENDS; }
kernel_ipv4_small_sends() { xfer 9115 v4 -- -s 64 -n $SMALL_SENDS -d; }
kernel_ipv6_ten_connections() { xfer 9116 v6 -c 10 -- -c 10 -s 65536 -n 16 -d; }

# smoke <port> <kernel|user>: a serves with that kind of socket, b uses the
# other kind: a userspace rsocket (librspreload.so) against AF_RSTREAM.
smoke() {
	pre=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
	barrier "$1"
	if [ "$RSTREAM_ROLE" = a ]; then
		if [ "$2" = kernel ]; then
			"$ST/rstream_smoke" server "$RSTREAM_ADDR4" "$1" 65537 64
		else
			RSTREAM_SMOKE_INET=1 LD_PRELOAD=$pre timeout 120 \
				"$ST/rstream_smoke" server "$RSTREAM_ADDR4" "$1" 65537 64
		fi
	else
		sleep 2		# the server's listen; rsocket does not retry
		if [ "$2" = kernel ]; then
			RSTREAM_SMOKE_INET=1 LD_PRELOAD=$pre timeout 120 \
				"$ST/rstream_smoke" client "$RSTREAM_PEER4" "$1" 65537 64
		else
			timeout 120 "$ST/rstream_smoke" client "$RSTREAM_PEER4" "$1" 65537 64
		fi
	fi
}

kernel_server_userspace_client() { smoke 9121 kernel; }
userspace_server_kernel_client() { smoke 9122 user; }

ktap_print_header
ktap_set_plan 11
ktap_test_result "rstream sees rxe0" rstream_sees_rxe0
echo "#  RUN rsockets_ipv4"	# names the case that hangs
ktap_test_result "rsockets over IPv4 across the wire" rsockets_ipv4
echo "#  RUN rsockets_ipv6"
ktap_test_result "rsockets over IPv6 across the wire" rsockets_ipv6
for t in kernel_ipv4_both_ways kernel_ipv6_both_ways kernel_ipv4_tiny_buffers \
	 kernel_ipv4_8m_sends kernel_ipv4_small_sends \
	 kernel_ipv6_ten_connections kernel_server_userspace_client \
	 userspace_server_kernel_client; do
	echo "#  RUN $t"
	ktap_test_result "$t" "$t"
done
barrier 9102
ktap_finished
