#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The fuzzer: rstream_fuzz makes random socket calls on AF_RSTREAM sockets
# as an unprivileged user, with real connections checked underneath,
# while this script removes the RDMA device and adds it back, as root.
# Afterwards every socket, queue pair and CM id must be gone, the device
# must carry data again, and the module must unload.  A kernel splat
# anywhere fails the run (the rig reads the console); so does a call that
# hangs, which rstream_fuzz names.
#
#   RSTREAM_FUZZ_SECONDS  how long (default 60)
#   RSTREAM_FUZZ_SEED     the seed, to repeat a run (default: from the clock)

. "$(dirname "$0")/lib.sh"

ADDR4=${RSTREAM_ADDR4:-192.0.2.1}
SCALE=${RSTREAM_TIME_SCALE:-1}
FUZZ_TIME=${RSTREAM_FUZZ_SECONDS:-60}
SEED=${RSTREAM_FUZZ_SEED:-$(( $(date +%s) % 1000000007 ))}
OUT=/tmp/rstream_fuzz.out
STOP=/tmp/rstream_fuzz.stop
DYNDBG=/sys/kernel/debug/dynamic_debug/control
NETDEV=$(rdma link show rxe0/1 2>/dev/null | sed -n 's/.* netdev \([^ ]*\).*/\1/p')

# rxe0 back, with its port active.
rxe0_back() {
	rdma link show rxe0/1 >/dev/null 2>&1 ||
		rdma link add rxe0 type rxe netdev "$NETDEV" || return 1
	i=0
	until rdma link show rxe0/1 2>/dev/null | grep -q "state ACTIVE"; do
		i=$((i + 1))
		[ $i -gt 100 ] && return 1
		sleep 0.1
	done
}
trap 'rxe0_back' EXIT

# The next number of a generator seeded with the fuzzer's seed, in $R.
next_r() {
	R=$(( (R * 1103515245 + 12345) % 2147483648 ))
}

# Remove rxe0 and add it back at random moments until told to stop.  A
# removal waits for rstream to free everything on the device: one that
# does not finish in 60 s is a hang, and its stack is shown.
cycle_device() {
	R=$SEED
	n=0
	while [ ! -e $STOP ]; do
		# 2 to 5 s between removals, times a slow kernel's scale / 4,
		# so that connections get made in between.
		next_r
		sleep $(( (R / 7 % 4 + 2) * (SCALE + 3) / 4 ))
		[ -e $STOP ] && break
		rdma link delete rxe0 &
		del=$!
		i=0
		while kill -0 $del 2>/dev/null; do
			i=$((i + 1))
			if [ $i -gt $((600 * SCALE)) ]; then
				echo "device removal $n hung; its stack:"
				cat /proc/$del/stack
				kill $del
				return 1
			fi
			sleep 0.1
		done
		wait $del || { echo "rdma link delete rxe0 failed"; return 1; }
		n=$((n + 1))
		next_r
		sleep "0.$((R / 7 % 10))"
		rxe0_back || { echo "rxe0 did not come back"; return 1; }
	done
	echo "rxe0 removed and added back $n times"
}

fuzz() {
	[ -n "$NETDEV" ] || die "no rxe0 in 'rdma link show'"
	rm -f $STOP
	echo "seed $SEED (RSTREAM_FUZZ_SEED=$SEED repeats the calls), $FUZZ_TIME s"
	cycle_device > /tmp/rstream_fuzz.device 2>&1 &
	cycler=$!
	"$DIR/rstream_fuzz" -s "$SEED" -t "$FUZZ_TIME" -g $((30 * SCALE)) \
		-p 21000 > $OUT 2>&1
	rc=$?
	touch $STOP
	wait $cycler
	crc=$?
	cat $OUT /tmp/rstream_fuzz.device
	if [ $rc = 3 ]; then
		# The kernel's side of each hung call.
		for t in /proc/[0-9]*/task/*; do
			grep -qs rstream_fuzz "$t/comm" 2>/dev/null || continue
			echo "$t: $(cat "$t/wchan")"
			sed 's/^/  /' "$t/stack"
		done
	fi
	[ $rc = 0 ] || die "rstream_fuzz failed (exit $rc, seed $SEED)"
	[ $crc = 0 ] || die "the device cycling failed (seed $SEED)"
}

# Closed sockets finish their teardown in the background (an in-band
# DISCONNECT, at most 2 s each): wait for the last.
everything_released() {
	limit=$((300 * SCALE))
	i=0
	while :; do
		socks=$(rstream_sockets)
		qps=$(rdma res show qp 2>/dev/null | grep -c 'comm \[rstream\]')
		ids=$(rdma res show cm_id 2>/dev/null | grep -c 'comm \[rstream\]')
		[ "$socks" = 0 ] && [ "$qps" = 0 ] && [ "$ids" = 0 ] && break
		i=$((i + 1))
		[ $i -gt $limit ] && die "after $((limit / 10)) s: $socks sockets, $qps queue pairs, $ids CM ids of rstream remain"
		sleep 0.1
	done
	echo "all released $((i / 10)) s after the fuzzer ended"
}

# counters: soft-RoCE's and ib_cm's counters of rxe0's port, "name value"
# per line, sorted.
counters() {
	port=/sys/class/infiniband/rxe0/ports/1
	for f in "$port"/hw_counters/* "$port"/cm_*/*; do
		[ -f "$f" ] && echo "${f#"$port"/} $(cat "$f")"
	done | sort
}

# moved <before> <after> <name>: how much counter <name> grew.
moved() {
	awk -v n="$3" '$1 == n { v[FILENAME] = $2 }
		END { print v[ARGV[2]] - v[ARGV[1]] }' "$1" "$2"
}

# remake_rxe0 <why>: soft-RoCE's GSI QP is in a state it does not leave.
remake_rxe0() {
	echo "$1 (soft-RoCE, README): rxe0 made again"
	rdma link delete rxe0 || die "rdma link delete rxe0 failed"
	rxe0_back || die "rxe0 is not back"
}

# probe_rxe_rcv on|off: trace soft-RoCE's receive path (rxe_rcv(), the
# QP lookup in its header check, then the ICRC check), to name the check
# that drops a packet: 6.1's rxe_rcv() drops without a word.
probe_rxe_rcv() {
	t=/sys/kernel/tracing
	[ -e $t/kprobe_events ] || mount -t tracefs nodev $t 2>/dev/null
	if [ "$1" = on ]; then
		# shellcheck disable=SC2016 # $retval is the tracer's
		{
			echo 'p:rsdiag/rcv rxe_rcv'
			echo 'p:rsdiag/get_index rxe_pool_get_index index=%si:u32'
			echo 'r:rsdiag/get_index_ret rxe_pool_get_index ret=$retval:x64'
			echo 'r:rsdiag/icrc_check rxe_icrc_check ret=$retval:s32'
		} >> $t/kprobe_events 2>/dev/null
		echo > $t/trace
		echo 1 > $t/events/rsdiag/enable 2>/dev/null
	else
		echo 0 > $t/events/rsdiag/enable 2>/dev/null
		grep -v "^#" $t/trace 2>/dev/null | sed 's/^ *//' | tail -n 24
		echo > $t/kprobe_events 2>/dev/null
	fi
}

# xfer_loop <port> [<limit in s>]: a connection to ourselves, data checked.
# 4 MiB each way take under a second on the stock kernels and about 13 s
# on the debug one; the attempts that only tell a stuck device from a
# failure of ours get 20 s (scaled), so that a GSI QP that lost its
# packets costs the run less than a minute.
xfer_loop() {
	"$DIR/rstream_xfer" loop "$ADDR4" "$1" -s 65536 -n 64 -d \
		-T $((${2:-60} * SCALE))
}

# The device works for rstream again.  Two states of soft-RoCE's GSI QP
# (QP1, which carries the CM's messages) that rstream cannot cause or
# mend (README, known problems) make the device again, said so, before
# data must flow: QP1 in the error state (rxe_requester() errors any QP
# whose packet it cannot build, QP1 included), and QP1 no longer taking
# in what it is sent (seen on 6.1: the device sends the connection
# request to itself and receives no packet).  Any other failure fails.
device_carries_data_again() {
	rxe0_back || die "rxe0 is not back"
	rdma res show qp lqpn 1 | grep -q "state ERR" &&
		remake_rxe0 "rxe0's GSI QP is in the error state"
	xfer_loop 21020 20 && return
	echo "rdma_cm's ids:"
	rdma res show cm_id
	echo "queue pairs:"
	rdma res show qp
	echo "rxe0's counters: $(counters | grep -v ' 0$' | tr '\n' ' ')"
	echo "GIDs: $(cat /sys/class/infiniband/rxe0/ports/1/gids/[0-3] | tr '\n' ' ')"
	dmesg | grep -v "speed is unknown" | tail -n 20
	# A second attempt, watched: the counters before and after its
	# first 3 s, soft-RoCE's debug messages and its receive path.
	counters > /tmp/rstream_fuzz.before
	echo "module rdma_rxe +p" > $DYNDBG 2>/dev/null
	probe_rxe_rcv on
	xfer_loop 21021 20 &
	x=$!
	sleep 3
	echo "while the second connects:"
	rdma res show cm_id
	counters > /tmp/rstream_fuzz.after
	echo "soft-RoCE's receive path in those 3 s:"
	probe_rxe_rcv off
	echo "counters that moved in 3 s (before -> after):"
	awk 'NR == FNR { was[$1] = $2; next }
	     was[$1] != $2 { printf "%s %s->%s  ", $1, was[$1], $2 }
	     END { print "" }' /tmp/rstream_fuzz.before /tmp/rstream_fuzz.after
	echo "module rdma_rxe -p" > $DYNDBG 2>/dev/null
	dmesg | tail -n 12
	wait $x && die "no data over the first new connection; the second worked"
	sent=$(moved /tmp/rstream_fuzz.before /tmp/rstream_fuzz.after hw_counters/sent_pkts)
	rcvd=$(moved /tmp/rstream_fuzz.before /tmp/rstream_fuzz.after hw_counters/rcvd_pkts)
	if [ "$sent" = 0 ] || [ "$rcvd" != 0 ]; then
		die "no data over a new connection ($sent packets sent, $rcvd received)"
	fi
	remake_rxe0 "rxe0 sent itself $sent packets and received none"
	xfer_loop 21022 || die "no data over a new connection on rxe0 made again"
}

# The connections device_carries_data_again closed are still ending in
# the background (an in-band DISCONNECT each): unload_rstream waits.
module_unloads_and_reloads() {
	unload_rstream
	modprobe rstream || die "rstream does not load again"
}

run_tests fuzz everything_released device_carries_data_again \
	module_unloads_and_reloads
