#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Two hosts: a peer that vanishes without a word.  Guest a serves
# (rstream_live serve), guest b opens the same cases on TCP and on
# AF_RSTREAM at once (rstream_live case: keepalive on an idle connection
# blocked in recv, poll and epoll_wait, and on one that streamed first;
# TCP_USER_TIMEOUT on a stream, its sender blocked; an idle connection
# without keepalive; the bulk case's last write goes while b's packets
# are 50 ms late), then guest a cuts its wire for CUT_S seconds.  Every
# timed case must end with ETIMEDOUT near its bound, on both transports;
# the idle ones must outlive the cut.  Then guest a removes its RDMA
# device under a connection that b reads from: b must read ECONNRESET.
# Runs on both guests at once: RSTREAM_ROLE a or b.

. /usr/lib/rstream/selftests/ktap_helpers.sh

ST=/usr/lib/rstream/selftests
PORT=9400
CUT_S=14
GO=/tmp/rstream_live.go
GO2=/tmp/rstream_live.go2
SLOW=/tmp/rstream_live.slow
STEADY=/tmp/rstream_live.steady
CUT=/tmp/rstream_live.cut
CASES="recv poll epoll bulk stream idle"

barrier() {	# barrier <port>: both guests get past it together
	if [ "$RSTREAM_ROLE" = a ]; then
		echo go | nc -l -p "$1" > /dev/null
	else
		i=0
		until nc "$RSTREAM_PEER4" "$1" < /dev/null 2>/dev/null |
		      grep -q go; do
			i=$((i + 1))
			[ $i -gt 600 ] && return 1
			sleep 0.2
		done
	fi
}

# The bound of each case, in ms after the cut: keepalive 3 s idle, then
# three probes a second apart; a user timeout of 4 s.
bound() {
	case $1 in
	recv|poll|epoll|bulk) echo 6000 ;;
	stream) echo 4000 ;;
	*) echo 0 ;;
	esac
}

start_server() {
	"$ST/rstream_live" serve "$RSTREAM_ADDR4" $PORT > /tmp/live.serve 2>&1 &
	server=$!
	i=0
	until grep -q serving /tmp/live.serve; do
		i=$((i + 1))
		[ $i -gt 100 ] && { cat /tmp/live.serve; return 1; }
		sleep 0.1
	done
}

stop_server() {
	kill $server
	wait $server 2>/dev/null
	return 0
}

# rxe0 made anew, up to 10 s for its port to come up.
renew_device() {
	rdma link delete rxe0 || return 1
	rdma link add rxe0 type rxe netdev eth0 || return 1
	i=0
	until rdma link show rxe0/1 | grep -q "state ACTIVE"; do
		i=$((i + 1))
		[ $i -gt 100 ] && return 1
		sleep 0.1
	done
}

serve() {
	start_server || return 1
	barrier 9301
	barrier 9302		# b's cases are connected and ready
	# b makes GO_FILE, then this barrier: the wire goes right after it.
	barrier 9303
	ip link set eth0 down
	echo "# wire cut at $(date +%s)"
	sleep $CUT_S
	ip link set eth0 up
	echo "# wire back at $(date +%s)"
	barrier 9304		# b's cases are over
	return 0
}

# The device under a connection: b's blocked recv must end in ECONNRESET.
# First rxe0 is made anew, and the server with it: on 6.12 a MAD sent
# while the wire was cut (the DREQ of a connection whose writes failed)
# moves rxe's QP1 to the error state for good (rxe_requester ends the QP
# on any transmit error), and a's CM could send no DREQ again.
remove_device() {
	stop_server
	renew_device || return 1
	start_server || return 1
	barrier 9305		# serving again: b connects
	barrier 9306		# b's case echoed and is blocked in recv
	rdma link delete rxe0 || return 1
	echo "# rxe0 removed at $(date +%s)"
	sleep 3
	rdma link add rxe0 type rxe netdev eth0 || return 1
	barrier 9307		# b's case is over
	stop_server
}

# await_cases <pattern> <count>: up to 30 s for that many of the cases'
# outputs to have a line matching <pattern>, or for one to have failed.
await_cases() {
	i=0
	until [ "$(cat /tmp/live.*.* | grep -c "$1")" -ge "$2" ] ||
	      grep -q '^not ok' /tmp/live.*.*; do
		i=$((i + 1))
		[ $i -gt 300 ] && break
		sleep 0.1
	done
}

open_cases() {
	rm -f $GO $GO2 $CUT $SLOW $STEADY
	barrier 9301
	n=0 echoing=0 bulks=0 pids=
	for t in tcp rdma; do
		for c in $CASES; do
			"$ST/rstream_live" case "$RSTREAM_PEER4" $PORT $t $c \
				"$(bound $c)" > "/tmp/live.$t.$c" 2>&1 &
			pids="$pids $!"
			n=$((n + 1))
			[ "$c" = stream ] || echoing=$((echoing + 1))
			[ "$c" = bulk ] && bulks=$((bulks + 1))
		done
	done
	await_cases '^ready$' $n
	barrier 9302
	touch $GO
	# Our packets 50 ms late for the bulk cases' last write, so that it
	# is still in flight when keepalive looks at it.  The stream cases
	# start once the delay is gone: soft-RoCE has flushed queue pairs
	# that streamed over netem (once on 6.12, in 4 runs of 5 on
	# virtio-net, the debug kernel's wire).  On virtio-net the bulk case
	# goes without the delay.
	await_cases '^streamed$' $bulks
	delayed=yes slow=no
	driver=$(readlink /sys/class/net/eth0/device/driver)
	if [ "${driver##*/}" = virtio_net ]; then
		echo "# no delay on virtio-net"
	else
		slow=yes
		tc qdisc add dev eth0 root netem delay 50ms || delayed=no
	fi
	touch $SLOW
	await_cases '^looked$' $bulks
	if [ $slow = yes ]; then
		tc qdisc del dev eth0 root || delayed=no
	fi
	touch $STEADY
	# The wire goes once every case that echoes is idle, its echo back
	# and its bytes acknowledged: keepalive probes only idle connections.
	await_cases '^idle ' $echoing
	barrier 9303
	# Guest a cuts the wire as it leaves the barrier: the cases time
	# their ends from here, however long after the go it came.
	touch $CUT
	# The longest case: the idle ones, 20 s after the cut, then up to 30 s
	# for the echo.
	# shellcheck disable=SC2086
	wait $pids
	echo "# cases over at $(date +%s)"
	barrier 9304
	[ $delayed = yes ]
}

device_removed() {
	f=/tmp/live.rdma.removal
	barrier 9305 || return 1
	rm -f $GO2
	"$ST/rstream_live" case "$RSTREAM_PEER4" $PORT rdma removal 1000 \
		> $f 2>&1 &
	removal=$!
	i=0
	until grep -q '^ready$\|^not ok' $f; do
		i=$((i + 1))
		[ $i -gt 300 ] && break
		sleep 0.1
	done
	touch $GO2
	sleep 1		# its echoes, then its recv blocks
	barrier 9306
	wait "$removal"
	rc=$?
	sed 's/^/# /' $f
	barrier 9307
	return $rc
}

ktap_print_header
if [ "$RSTREAM_ROLE" = a ]; then
	ktap_set_plan 2
	ktap_test_result "serve, cut the wire for $CUT_S s, restore it" serve
	ktap_test_result "remove rxe0 under a connection, add it back" \
		remove_device
else
	ktap_set_plan 14
	ktap_test_result "open every case, the wire cut and restored" open_cases
	for t in tcp rdma; do
		for c in $CASES; do
			f=/tmp/live.$t.$c
			sed 's/^/# /' "$f"
			grep -q "^ok " "$f"
			ktap_test_result "$t $c" test $? -eq 0
		done
	done
	ktap_test_result "rdma: the peer's device removed: ECONNRESET" \
		device_removed
fi
ktap_finished
