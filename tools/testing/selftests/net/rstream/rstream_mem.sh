#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# What connections pin is charged and bounded: each connection's rings,
# target array and queues count in /proc/net/protocols (RSTREAM's memory,
# in pages) and in the memory cgroup of its owner, and come back when it
# closes; past rstream's limit (the mem_limit parameter) or a cgroup's
# memory.max a connection is refused with ENOBUFS, the reason is logged,
# nobody is killed, and connections work again once memory is free.

. "$(dirname "$0")/lib.sh"

ADDR4=${RSTREAM_ADDR4:-192.0.2.1}
CG=/sys/fs/cgroup
CG_TEST=$CG/rstream_test
OUT=/tmp/rstream_mem

cleanup() {
	[ -n "$SERVE" ] && kill "$SERVE" 2>/dev/null
	[ -n "$FILL" ] && kill "$FILL" 2>/dev/null
	wait 2>/dev/null
	echo 0 > "$PARAMS/mem_limit"
	echo 64 > "$PARAMS/sqsize_default"
	echo 128 > "$PARAMS/rqsize_default"
	echo 64 > "$PARAMS/inline_default"
	[ -d $CG_TEST ] && rmdir $CG_TEST 2>/dev/null
}
trap cleanup EXIT

pages() {	# RSTREAM's memory in /proc/net/protocols, in pages
	awk '$1 == "RSTREAM" { print $4 }' /proc/net/protocols
}

# start <serve|fill> <steps...>: rstream_cmd in the background, output in
# $OUT.<serve|fill>, its pid in $SERVE or $FILL.
start() {
	name=$1
	shift
	# Emptied here, not by the redirection in the child: else the wait
	# for a line may find the last run's and go on before this one runs
	# (a CI run at 2325b0b did, in device_queues_charged).
	: > "$OUT.$name"
	"$DIR/rstream_cmd" "$@" >> "$OUT.$name" 2>&1 &
	case $name in
	serve) SERVE=$! ;;
	*) FILL=$! ;;
	esac
}

wait_line() {	# wait_line <name> <pattern>: until its output has it
	i=0
	until grep -q "$2" "$OUT.$1"; do
		i=$((i + 1))
		[ $i -gt $((1200 * ${RSTREAM_TIME_SCALE:-1})) ] &&
			die "$1 never printed '$2': $(cat "$OUT.$1")"
		sleep 0.1
	done
}

stop() {	# stop <pid>: a paused or serving rstream_cmd ends
	kill -USR1 "$1" 2>/dev/null
	wait "$1"
}

# Closed connections finish in the background: until nothing is left.
wait_released() {
	wait_no_sockets 60 || die "sockets remain 60 s after closing"
}

# A per-CPU cache holds up to 256 pages of the total back (net.core's
# mem_pcpu_rsv): both CPUs' worth is slack in what /proc shows.
SLACK=512

charged_and_given_back() {
	wait_released
	before=$(pages)
	start serve serve,"$ADDR4",20301
	wait_line serve "listening"
	start fill fill,"$ADDR4",20301,20 pause
	wait_line fill "^pause"
	grep -q "fill: 20 made$" $OUT.fill || die "fill: $(cat $OUT.fill)"
	held=$(pages)
	stop "$FILL"
	stop "$SERVE"
	wait_released
	after=$(pages)
	# Two sockets per connection, each at least its two 128 KiB rings.
	echo "RSTREAM memory: $before pages, $held with 20 connections, $after after"
	[ $((held - before)) -ge $((20 * 2 * 64 - SLACK)) ] ||
		die "20 connections added only $((held - before)) pages"
	[ $((after - before)) -le $SLACK ] && [ $((before - after)) -le $SLACK ] ||
		die "$((after - before)) pages stayed charged"
}

# Pages soft-RoCE holds in its queues (rxe_queue_init()'s vmalloc areas).
rxe_queue_pages() {
	awk '/ rxe_queue_init\+/ { for (i = 1; i <= NF; i++)
		if ($i ~ /^pages=/) { sub(/pages=/, "", $i); n += $i } }
	     END { print n + 0 }' /proc/vmallocinfo
}

# Bytes in the vmap areas of the regions a connection registers (ring,
# staging ring, target array), each with its guard page.
buf_bytes() {
	awk '/ rstream_buf_alloc\+/ { n += $2 } END { print n + 0 }' \
		/proc/vmallocinfo
}

bytes_pinned() {
	awk '$1 == "pinned" { print $2 }' /proc/net/rstream/memory
}

# What a connection is charged for the device's queues covers what the
# device really keeps for them, measured here on soft-RoCE, at the
# default sizes and with the largest inline size and queues asked for
# (before, an estimate of 128 bytes an entry charged a third of it).
device_queues_charged() {
	for sizes in "64 128 64" "1024 1024 256"; do
		set -- $sizes
		echo "$1" > "$PARAMS/sqsize_default"
		echo "$2" > "$PARAMS/rqsize_default"
		echo "$3" > "$PARAMS/inline_default"
		wait_released
		q0=$(rxe_queue_pages)
		b0=$(buf_bytes)
		p0=$(bytes_pinned)
		start serve serve,"$ADDR4",20307
		wait_line serve "listening"
		start fill fill,"$ADDR4",20307,10 pause
		wait_line fill "^pause"
		grep -q "fill: 10 made$" $OUT.fill || die "fill: $(cat $OUT.fill)"
		# An accepted connection takes its rings once established,
		# which may be after its client's connect() returned: a
		# make check at 1ecca48 counted one ring short.
		want=$(( (32 + 32 + 1 + 3) * 4096 ))
		i=0
		while [ $(($(buf_bytes) - b0)) -lt $((20 * want)) ] &&
		      [ $i -lt $((100 * ${RSTREAM_TIME_SCALE:-1})) ]; do
			i=$((i + 1))
			sleep 0.1
		done
		q=$(( ($(rxe_queue_pages) - q0) * 4096 / 20 ))
		b=$(( ($(buf_bytes) - b0) / 20 ))
		# Less each socket's rings (128 KiB each; the grants we send
		# go out of the staging ring's last bytes) and its target
		# array's page.
		c=$(( ($(bytes_pinned) - p0) / 20 - (32 + 32 + 1) * 4096 ))
		stop "$FILL"
		stop "$SERVE"
		echo "sq $1 rq $2 inline $3: the device keeps $q bytes a socket, charged $c"
		echo "the regions' areas take $b bytes a socket"
		# The three regions are the page-aligned sizes asked for, no
		# page more (the staging ring took one more for 64 bytes of
		# grants), plus a guard page each.
		[ "$b" -eq "$want" ] ||
			die "the regions take $b bytes a socket, not $want"
		[ "$q" -gt 0 ] || die "no rxe_queue_init areas in /proc/vmallocinfo"
		[ "$c" -ge "$q" ] || die "charged $c bytes for $q the device keeps"
		[ "$c" -le $((2 * q)) ] || die "charged $c bytes for $q: over twice"
	done
	echo 64 > "$PARAMS/sqsize_default"
	echo 128 > "$PARAMS/rqsize_default"
	echo 64 > "$PARAMS/inline_default"
	wait_released
}

# fill_refused <limit text> <pattern of the refusal>: connect until
# refused, with the server in the background, and check the reason logged.
fill_refused() {
	wait_line fill "^fill:"
	grep -q "$2" $OUT.fill || die "expected $2: $(cat $OUT.fill)"
	new_log | grep -q "refused: over .*$1\|rejected: over .*$1" ||
		die "no log line naming $1: $(new_log | tail -n 3)"
	sed -n 's/^fill: //p' $OUT.fill
}

limit_refuses_with_enobufs() {
	wait_released
	echo 4096 > "$PARAMS/mem_limit"	# 16 MiB
	mark_log
	start serve serve,"$ADDR4",20302
	wait_line serve "listening"
	start fill fill,"$ADDR4",20302,10000 pause
	# The client's charge or the server's goes over first.
	fill_refused "mem_limit" "then \(ENOBUFS\|ECONNREFUSED\)"
	held=$(pages)
	[ "$held" -le $((4096 + SLACK)) ] ||
		die "$held pages charged over a limit of 4096"
	stop "$FILL"
	stop "$SERVE"
	wait_released
	echo 0 > "$PARAMS/mem_limit"
	"$DIR/rstream_xfer" loop "$ADDR4" 20303 -s 65536 -n 16 -T 60 ||
		die "no connection once the memory was free"
}

# A memory cgroup of 32 MiB; its processes' connections are charged there.
cgroup_make() {
	grep -q " $CG cgroup2 " /proc/mounts || mount -t cgroup2 none $CG ||
		die "cannot mount cgroup2"
	grep -qw memory $CG/cgroup.controllers ||
		die "no memory controller (CONFIG_MEMCG)"
	echo +memory > $CG/cgroup.subtree_control
	mkdir -p $CG_TEST
	echo 32M > $CG_TEST/memory.max
}

cgroup_check_no_oom() {
	kills=$(awk '$1 == "oom_kill" { print $2 }' $CG_TEST/memory.events)
	[ "$kills" = 0 ] || die "the cgroup's OOM killer ran $kills times"
	new_log | grep -q "Out of memory\|oom-kill" &&
		die "an OOM kill: $(new_log | grep -i oom | head -n 3)"
	return 0
}

cgroup_release() {
	stop "$FILL"
	stop "$SERVE"
	wait_released
	rmdir $CG_TEST || die "cannot remove the cgroup"
	"$DIR/rstream_xfer" loop "$ADDR4" 20304 -s 65536 -n 16 -T 60 ||
		die "no connection once the cgroup was gone"
}

# The connecting process is in the cgroup: its connect() fails.
cgroup_refuses_connect() {
	cgroup_make
	mark_log
	start serve serve,"$ADDR4",20305
	wait_line serve "listening"
	start fill pause fill,"$ADDR4",20305,10000 pause
	wait_line fill "^pause"
	echo "$FILL" > $CG_TEST/cgroup.procs
	kill -USR1 "$FILL"
	n=$(fill_refused "memory limit of its cgroup" "then ENOBUFS")
	echo "connections made in a 32 MiB cgroup: $n"
	echo "its memory.stat: $(grep -w sock $CG_TEST/memory.stat)"
	[ "$(awk '$1 == "sock" { print $2 }' $CG_TEST/memory.stat)" -gt 0 ] ||
		die "the cgroup's memory.stat shows no socket memory"
	cgroup_check_no_oom
	cgroup_release
}

# The listening process is in the cgroup: its connections are refused.
cgroup_refuses_accepted_connections() {
	cgroup_make
	mark_log
	start serve pause serve,"$ADDR4",20306
	wait_line serve "^pause"
	echo "$SERVE" > $CG_TEST/cgroup.procs
	kill -USR1 "$SERVE"
	wait_line serve "listening"
	start fill fill,"$ADDR4",20306,10000 pause
	n=$(fill_refused "memory limit of its cgroup" "then ECONNREFUSED")
	echo "connections accepted in a 32 MiB cgroup: $n"
	cgroup_check_no_oom
	cgroup_release
}

run_tests charged_and_given_back device_queues_charged \
	limit_refuses_with_enobufs \
	cgroup_refuses_connect cgroup_refuses_accepted_connections
