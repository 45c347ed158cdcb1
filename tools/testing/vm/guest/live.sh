#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Two hosts: a peer that vanishes without a word.  Guest a serves
# (rstream_live serve), guest b opens the same cases on TCP and on
# AF_RSTREAM at once (rstream_live case: keepalive on an idle connection
# blocked in recv, poll and epoll_wait; TCP_USER_TIMEOUT on a stream, its
# sender blocked; an idle connection without keepalive), then
# guest a cuts its wire for CUT_S seconds.  Every timed case must end with
# ETIMEDOUT near its bound, on both transports; the idle ones must
# outlive the cut.  Runs on both guests at once: RSTREAM_ROLE a or b.

. /usr/lib/rstream/selftests/ktap_helpers.sh

ST=/usr/lib/rstream/selftests
PORT=9400
CUT_S=14
GO=/tmp/rstream_live.go
CASES="recv poll epoll stream idle"

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

# The bound of each case, in ms after the go: keepalive 3 s idle, then
# three probes a second apart; a user timeout of 4 s.
bound() {
	case $1 in
	recv|poll|epoll) echo 6000 ;;
	stream) echo 4000 ;;
	*) echo 0 ;;
	esac
}

serve() {
	"$ST/rstream_live" serve "$RSTREAM_ADDR4" $PORT > /tmp/live.serve 2>&1 &
	server=$!
	i=0
	until grep -q serving /tmp/live.serve; do
		i=$((i + 1))
		[ $i -gt 100 ] && { cat /tmp/live.serve; return 1; }
		sleep 0.1
	done
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
	kill $server
	wait $server 2>/dev/null
	return 0
}

open_cases() {
	rm -f $GO
	barrier 9301
	n=0
	for t in tcp rdma; do
		for c in $CASES; do
			"$ST/rstream_live" case "$RSTREAM_PEER4" $PORT $t $c \
				"$(bound $c)" > "/tmp/live.$t.$c" 2>&1 &
			n=$((n + 1))
		done
	done
	i=0
	until [ "$(cat /tmp/live.*.* | grep -c '^ready$')" -ge $n ] ||
	      grep -q '^not ok' /tmp/live.*.*; do
		i=$((i + 1))
		[ $i -gt 300 ] && break
		sleep 0.1
	done
	barrier 9302
	touch $GO
	barrier 9303
	# The longest case: the idle ones, 20 s, then up to 30 s for the echo.
	wait
	echo "# cases over at $(date +%s)"
	barrier 9304
}

ktap_print_header
if [ "$RSTREAM_ROLE" = a ]; then
	ktap_set_plan 1
	ktap_test_result "serve, cut the wire for $CUT_S s, restore it" serve
else
	ktap_set_plan 11
	ktap_test_result "open every case, the wire cut and restored" open_cases
	for t in tcp rdma; do
		for c in $CASES; do
			f=/tmp/live.$t.$c
			sed 's/^/# /' "$f"
			grep -q "^ok " "$f"
			ktap_test_result "$t $c" test $? -eq 0
		done
	done
fi
ktap_finished
