#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The fault sweep: one allocation failure at a time, injected into the
# allocations a connection's life makes (connect, accept, data both ways,
# close), each in turn: first every slab and page allocation made from
# rstream.ko or below it (rdma_cm, ib_core, the device's verbs), then
# soft-RoCE's own (packets, tasks).  After each failure the cycle must end,
# with an error or without, within its time limit; no byte may arrive
# wrong.  After each sweep a cycle without failures must work and nothing
# may be left behind.  Splats fail the run (the rig reads the console),
# and leaks too (kmemleak, after the suites).  Needs fault injection with
# its stack filter: the debug kernel.
#
# How the n-th allocation is found: failslab and fail_page_alloc count the
# calls that pass their filter while an interval above 1 is set, and fail
# the call where that count is a multiple of the interval.  The count is
# not readable, but starts at 0 at boot and only moves here, so the sweep
# keeps it (in $STATE): with interval count + n, the n-th call from now
# fails, and the count is then count + n.
#
# Left out, by its filter: soft-RoCE's requester (rxe_requester).  A
# packet it cannot allocate moves the queue pair to the error state, and
# when that queue pair is the device's GSI QP (QP1, the connection
# manager's), it stays there: no connection can be made on the device
# again until it is re-created.  That is soft-RoCE's (README, open
# problems); rstream_data.sh's device_fails_a_packet_allocation covers a
# data packet that cannot be allocated.

. "$(dirname "$0")/lib.sh"

ADDR4=${RSTREAM_ADDR4:-192.0.2.1}
SCALE=${RSTREAM_TIME_SCALE:-1}
DBG=/sys/kernel/debug
STATE=/tmp/rstream_faults
CYCLE_OUT=/tmp/rstream_faults.out

# extent <module> [<function>]: "start end" in hex, of the module's memory
# or of one of its functions (from its address to the next symbol's).
extent() {
	if [ -z "$2" ]; then
		# shellcheck disable=SC2046 # two words: address and size
		set -- $(awk -v m="$1" '$1 == m { print $6, $2 }' /proc/modules)
		[ $# = 2 ] && printf "0x%x 0x%x\n" $(($1)) $(($1 + $2))
		return
	fi
	grep "\[$1\]\$" /proc/kallsyms | sort |
		awk -v f="$2" 'found { print "0x" $1; exit }
			$3 == f { printf "0x%s ", $1; found = 1 }'
}

# The filter and switches of fault attribute $1 (failslab, fail_page_alloc).
arm_filter() {
	attr=$DBG/$1
	require=$2
	reject=${3:-0 0}
	echo 0 > "$attr/probability"
	echo 0 > "$attr/verbose"	# a stack dump per failure reads as a splat
	echo 0 > "$attr/space"
	echo N > "$attr/ignore-gfp-wait"
	[ -e "$attr/ignore-gfp-highmem" ] && echo N > "$attr/ignore-gfp-highmem"
	[ -e "$attr/min-order" ] && echo 0 > "$attr/min-order"
	echo 32 > "$attr/stacktrace-depth"
	# shellcheck disable=SC2086 # "start end"
	set -- $require
	echo "$1" > "$attr/require-start"
	echo "$2" > "$attr/require-end"
	# shellcheck disable=SC2086 # "start end"
	set -- $reject
	echo "$1" > "$attr/reject-start"
	echo "$2" > "$attr/reject-end"
}

# One cycle: a connection made, 8 KiB sent each way, closed.  0 if it
# ended in time, whatever it said; the time limit is a hang.
cycle() {
	"$DIR/rstream_xfer" loop "$ADDR4" "$1" -s 4096 -n 2 -d -b 4096 \
		-T $((30 * SCALE)) > $CYCLE_OUT 2>&1
	if grep -q "time limit" $CYCLE_OUT; then
		echo "a cycle hung after failure $2: $(cat $CYCLE_OUT)"
		return 1
	fi
	if grep -q "byte .* is " $CYCLE_OUT; then
		echo "data went wrong after failure $2: $(cat $CYCLE_OUT)"
		return 1
	fi
	if grep -q "^ok" $CYCLE_OUT; then
		echo "carried its data" >> $STATE.errors
	else
		sed -n 's/^FAIL: .*: \([^:]*\)$/\1/p' $CYCLE_OUT | tail -n 1 |
			grep . >> $STATE.errors ||
			echo "ended: $(tail -n 1 $CYCLE_OUT)" >> $STATE.errors
	fi
	return 0
}

# sweep <attribute> <module> [<function left out>]
sweep() {
	attr=$DBG/$1
	range=$(extent "$2")
	[ -n "$range" ] || die "$2 is not loaded"
	reject=
	[ -n "$3" ] && reject=$(extent "$2" "$3")
	arm_filter "$1" "$range" "$reject"
	injecting_failures begin
	count=$(cat "$STATE.$1" 2>/dev/null || echo 0)
	: > $STATE.errors
	n=1
	fired=0
	while :; do
		port=$((20400 + n % 500))
		echo $((count + n)) > "$attr/interval"
		echo 1 > "$attr/times"
		echo 100 > "$attr/probability"
		cycle $port $n || { echo 0 > "$attr/probability"; die "$1 in $2"; }
		if [ "$(cat "$attr/times")" = 1 ]; then
			# Past the cycle's last allocation: go on until the
			# armed failure happens, so the count is known again.
			i=0
			while [ "$(cat "$attr/times")" = 1 ] && [ $i -lt 5 ]; do
				cycle $port "$n (late)" || die "$1 in $2"
				i=$((i + 1))
			done
			echo 0 > "$attr/probability"
			[ "$(cat "$attr/times")" = 0 ] ||
				die "$1: the armed failure never came"
			[ $((count + n)) -gt 1 ] && count=$((count + n))
			break
		fi
		fired=$((fired + 1))
		# An interval of 1 fails at once, without counting.
		[ $((count + n)) -gt 1 ] && count=$((count + n))
		n=$((n + 1))
	done
	injecting_failures end
	echo "$count" > "$STATE.$1"
	echo "$fired allocations failed in turn; how the cycles ended:"
	sort $STATE.errors | uniq -c | sed 's/^/  /'
	# Nothing fails now: a cycle works and nothing is left behind.
	cycle 20399 none || die "the cycle without failures"
	grep -q "^ok" $CYCLE_OUT || die "the cycle without failures: $(cat $CYCLE_OUT)"
	i=0
	until [ "$(rstream_sockets)" = 0 ] &&
	      [ "$(rdma res show qp | grep -c 'comm \[rstream\]')" = 0 ]; do
		i=$((i + 1))
		[ $i -gt $((300 * SCALE)) ] && die "sockets or queue pairs remain after the sweep"
		sleep 0.1
	done
}

rstream_slab_allocations() { sweep failslab rstream; }
rstream_page_allocations() { sweep fail_page_alloc rstream; }
rxe_slab_allocations() { sweep failslab rdma_rxe rxe_requester; }
rxe_page_allocations() { sweep fail_page_alloc rdma_rxe rxe_requester; }

if ! [ -w $DBG/failslab/probability ] ||
   ! [ -w $DBG/fail_page_alloc/probability ]; then
	die "no fault injection in this kernel (the debug kernel has it)"
fi
trap 'injecting_failures end' EXIT	# after a sweep that died
run_tests rstream_slab_allocations rstream_page_allocations \
	rxe_slab_allocations rxe_page_allocations
