#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# rstream's life cycle and the RDMA devices it tracks: devices added and
# removed while loaded, the driver unloaded under it, unload and reload with
# devices present, sockets pinning the module.  Needs rxe0 (set up by the
# VM runner); restores it if a case removed it.

. "$(dirname "$0")/lib.sh"

DEVICES=/proc/net/rstream/devices
RXE0_NETDEV=$(rdma link show rxe0/1 2>/dev/null |
	      sed -n 's/.* netdev \([^ ]*\).*/\1/p')

restore() {
	rmmod rstream_test_stall 2>/dev/null
	[ -d /sys/module/rstream ] || modprobe rstream
	if ! rdma link show rxe0/1 >/dev/null 2>&1; then
		modprobe rdma_rxe && rdma link add rxe0 type rxe netdev "$RXE0_NETDEV"
	fi
	for dev in rxe9 rxe8 rxe7; do
		rdma link delete $dev 2>/dev/null
	done
	ip link delete rsdummy9 2>/dev/null
}
trap restore EXIT

listed() {	# listed <device> <transport>
	grep -qx "$1 1 $2" "$DEVICES"
}

# wait_listed <device> <transport> <yes|no>: device registration is
# synchronous, but allow the RDMA core a moment all the same.
wait_listed() {
	i=0
	while :; do
		if listed "$1" "$2"; then
			[ "$3" = yes ] && return 0
		else
			[ "$3" = no ] && return 0
		fi
		i=$((i + 1))
		[ $i -gt 50 ] && die "$1 ($2) listed: expected $3; $DEVICES:
$(cat $DEVICES)"
		sleep 0.1
	done
}

rxe0_is_listed() {
	[ -n "$RXE0_NETDEV" ] || die "no rxe0 in 'rdma link show'"
	wait_listed rxe0 roce yes
}

siw0_is_listed() {
	wait_listed siw0 iwarp yes
}

devices_seen_in_new_netns() {
	unshare -n sh -c "grep -qx 'rxe0 1 roce' $DEVICES" ||
		die "rxe0 not listed in a new network namespace"
}

# A second soft-RoCE device, rxe9 on its own dummy netdev rsdummy9.
add_rxe9() {
	ip link add rsdummy9 type dummy && ip link set rsdummy9 up ||
		die "cannot add a dummy netdev"
	rdma link add rxe9 type rxe netdev rsdummy9 || die "cannot add rxe9"
	wait_listed rxe9 roce yes
}

device_added_while_loaded() {
	add_rxe9
}

device_removed_while_loaded() {
	rdma link delete rxe9 || die "cannot delete rxe9"
	wait_listed rxe9 roce no
	ip link delete rsdummy9
}

# rstream lists a device under its current name (its own copy, updated by
# the rename callback), and reads of the list during renames stay safe.
# The read-after-free the copy prevents lasted a few instructions, too
# short to hit reliably here: this case checks the copy follows renames.
device_renamed_while_loaded() {
	add_rxe9
	rdma dev set rxe9 name rxe8 || die "cannot rename rxe9"
	wait_listed rxe8 roce yes
	wait_listed rxe9 roce no
	(
		for i in $(seq 50); do
			rdma dev set rxe8 name rxe7 && rdma dev set rxe7 name rxe8
		done
	) &
	renamer=$!
	while kill -0 $renamer 2>/dev/null; do
		cat $DEVICES > /dev/null || die "cannot read $DEVICES"
	done
	wait $renamer || die "renaming failed"
	wait_listed rxe8 roce yes
	rdma link delete rxe8 || die "cannot delete rxe8"
	wait_listed rxe8 roce no
	ip link delete rsdummy9
}

devices_come_and_go() {
	ip link add rsdummy9 type dummy && ip link set rsdummy9 up ||
		die "cannot add a dummy netdev"
	for i in 1 2 3 4 5 6 7 8 9 10; do
		rdma link add rxe9 type rxe netdev rsdummy9 ||
			die "round $i: cannot add rxe9"
		wait_listed rxe9 roce yes
		rdma link delete rxe9 || die "round $i: cannot delete rxe9"
		wait_listed rxe9 roce no
	done
	ip link delete rsdummy9
	wait_listed rxe0 roce yes
}

unload_and_reload_with_devices_present() {
	unload_rstream
	[ -e $DEVICES ] && die "$DEVICES still there after unload"
	modprobe rstream || die "cannot load rstream"
	wait_listed rxe0 roce yes
}

open_socket_pins_module() {
	"$DIR/rstream_sock" 22 hold > /tmp/rstream_hold.out &
	pid=$!
	i=0
	until [ "$(cat /tmp/rstream_hold.out)" = ok ]; do
		i=$((i + 1))
		[ $i -gt 50 ] && { kill $pid; die "socket not created"; }
		sleep 0.1
	done
	if rmmod rstream 2>/dev/null; then
		kill $pid
		die "rstream unloaded under an open socket"
	fi
	kill $pid
	wait $pid
	rmmod rstream || die "cannot unload rstream once the socket closed"
	modprobe rstream || die "cannot load rstream"
}

# The first socket() of the family loads the module (its net-pf-22 alias,
# which depmod put in modules.alias), as for any protocol module.
socket_loads_module() {
	unload_rstream
	out=$("$DIR/rstream_sock" 22)
	[ "$out" = ok ] || die "socket(22, SOCK_STREAM, 0) without rstream loaded: $out"
	[ -d /sys/module/rstream ] || die "the socket was made but rstream is not loaded"
	wait_listed rxe0 roce yes
}

# rxe0 back with its port up, after a case took it away.
rxe0_back() {
	rdma link show rxe0/1 >/dev/null 2>&1 ||
		rdma link add rxe0 type rxe netdev "$RXE0_NETDEV" ||
		die "cannot add rxe0 again"
	wait_listed rxe0 roce yes
	i=0
	until rdma link show rxe0/1 | grep -q "state ACTIVE"; do
		i=$((i + 1))
		[ $i -gt 100 ] && die "rxe0 port not ACTIVE again"
		sleep 0.1
	done
}

# rstream_cmd in the background: its steps, output in $CMD_OUT.
CMD_OUT=/tmp/rstream_cmd.out
cmd_start() {
	"$@" > $CMD_OUT 2>&1 &
	CMD_PID=$!
}

cmd_wait_pause() {	# cmd_wait_pause <n>: until its n-th pause
	i=0
	until [ "$(grep -c '^pause: waiting' $CMD_OUT)" -ge "$1" ]; do
		kill -0 $CMD_PID 2>/dev/null || die "rstream_cmd ended: $(cat $CMD_OUT)"
		i=$((i + 1))
		[ $i -gt 600 ] && { kill $CMD_PID; die "rstream_cmd never reached pause $1: $(cat $CMD_OUT)"; }
		sleep 0.1
	done
}

cmd_end() {
	wait $CMD_PID
	cat $CMD_OUT
}

expect_steps() {	# expect_steps <line>...: the output, exactly
	want=$(printf '%s\n' "$@")
	[ "$(cat $CMD_OUT)" = "$want" ] || die "rstream_cmd said:
$(cat $CMD_OUT)
expected:
$want"
}

# A socket bound to the device's address while the device goes away:
# listen() fails while there is no device and works once it is back, on
# the same address and port.  The CM id went with the device, and listen()
# once called rdma_listen() without one: a NULL pointer dereference.
listen_after_device_removal() {
	addr=${RSTREAM_ADDR4:-192.0.2.1}
	cmd_start "$DIR/rstream_cmd" socket,0 bind,0,$addr,20211 pause \
		listen,0,4 pause listen,0,4 sockname,0 socket,1 \
		connect,1,$addr,20211 accept,0,2 close,2 close,1 close,0
	cmd_wait_pause 1
	rdma link delete rxe0 || die "cannot delete rxe0"
	kill -USR1 $CMD_PID
	cmd_wait_pause 2
	rxe0_back
	kill -USR1 $CMD_PID
	cmd_end
	expect_steps "socket: ok" "bind: ok" "pause: waiting" "pause: ok" \
		"listen: EADDRNOTAVAIL" "pause: waiting" "pause: ok" "listen: ok" \
		"sockname: ok $addr 20211" "socket: ok" "connect: ok" \
		"accept: ok" "close: ok" "close: ok" "close: ok"
}

# A listener whose device goes away says so: poll() reports an error and
# accept() fails with ENODEV instead of waiting for what cannot come.
listener_loses_its_device() {
	addr=${RSTREAM_ADDR4:-192.0.2.1}
	cmd_start "$DIR/rstream_cmd" socket,0 bind,0,$addr,20212 listen,0,4 \
		pause poll,0 accept,0,1 close,0
	cmd_wait_pause 1
	rdma link delete rxe0 || die "cannot delete rxe0"
	kill -USR1 $CMD_PID
	cmd_end
	rxe0_back
	expect_steps "socket: ok" "bind: ok" "listen: ok" "pause: waiting" \
		"pause: ok" "poll: ok POLLERR" "accept: ENODEV" "close: ok"
}

# A transparent listener that loses its device goes on listening on TCP,
# and RSTREAM_PATH says so (it read both paths after the removal).
transparent_listener_loses_rdma() {
	addr=${RSTREAM_ADDR4:-192.0.2.1}
	cmd_start "$DIR/rstream_cmd" tsocket,0 bind,0,$addr,20214 listen,0,4 \
		getopt,0,path pause getopt,0,path close,0
	cmd_wait_pause 1
	rdma link delete rxe0 || die "cannot delete rxe0"
	kill -USR1 $CMD_PID
	cmd_end
	rxe0_back
	expect_steps "tsocket: ok" "bind: ok" "listen: ok" "getopt: ok 3" \
		"pause: waiting" "pause: ok" "getopt: ok 2" "close: ok"
}

# The device goes away while sockets on it close, each the moment its
# removal begins (poll sees the error that the removal sets first):
# connected sockets, bound ones, and listeners with connections nobody
# accepted.  The removal runs at the lowest priority, on the CPU of the
# closer and of the teardown work, with the kernel fully preemptible for
# the while: a task woken by the removal handler's unlock runs at once,
# inside the handler.  The handler once went on writing to the socket
# after letting go of its lock, which a close could free meanwhile
# (KASAN on the debug kernel: use-after-free, in every run).
PREEMPT=/sys/kernel/debug/sched/preempt
device_removed_while_sockets_close() {
	addr=${RSTREAM_ADDR4:-192.0.2.1}
	[ -w $PREEMPT ] || die "no $PREEMPT (CONFIG_PREEMPT_DYNAMIC, SCHED_DEBUG)"
	model=$(sed 's/.*(\(.*\)).*/\1/' $PREEMPT)
	steps="socket,1 bind,1,$addr,20213 listen,1,64"
	steps="$steps socket,2 bind,2,$addr,20214 listen,2,16"
	s=10
	while [ $s -lt 34 ]; do	# 24 connections, both ends
		steps="$steps socket,$s connect,$s,$addr,20213 accept,1,$((s + 40))"
		s=$((s + 1))
	done
	while [ $s -lt 42 ]; do	# 8 that nobody accepts
		steps="$steps socket,$((s + 40)) connect,$((s + 40)),$addr,20214"
		s=$((s + 1))
	done
	s=100
	while [ $s -lt 108 ]; do	# 8 bound only
		steps="$steps socket,$s bind,$s,$addr,0"
		s=$((s + 1))
	done
	# shellcheck disable=SC2086 # a list of steps
	cmd_start taskset -c 0 "$DIR/rstream_cmd" $steps pause \
		close_on_error,1,107
	cmd_wait_pause 1
	grep -qv ": ok$\|^pause" $CMD_OUT && die "setting up: $(cat $CMD_OUT)"
	echo full > $PREEMPT
	chrt -i 0 taskset -c 0 rdma link delete rxe0 &
	del=$!
	kill -USR1 $CMD_PID
	i=0
	while kill -0 $del 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 600 ]; then
			echo "$model" > $PREEMPT
			cat /proc/$del/stack
			die "the removal did not finish in 60 s"
		fi
		sleep 0.1
	done
	wait $del
	del_rc=$?
	wait $CMD_PID
	# The guest's own model again once the closer is gone and the sockets
	# torn down: the switch patches every preemption point's static call,
	# and under TCG a vCPU that runs one meanwhile may still hit the
	# patch's int3 (known problems), which a quiet guest does not.
	wait_no_sockets 30
	left=$?
	echo "$model" > $PREEMPT
	[ $del_rc = 0 ] || die "rdma link delete rxe0 failed"
	tail -n 1 $CMD_OUT
	[ $left = 0 ] || die "sockets remain 30 s after the removal"
	rxe0_back
	"$DIR/rstream_xfer" loop "$addr" 20215 -s 65536 -n 16 -T 60 ||
		die "no connection on rxe0 re-added"
}

# A connection still being set up is closed, and its device goes while
# the teardown is between destroying the CM id and freeing the QP, held
# there by rstream_test_stall.  With the id gone rdma_cm had nothing to
# tell, and the removal freed the device under the QP (the fuzzer found
# it on the debug kernel: rxe_pool_cleanup warnings, then KASAN's
# use-after-free in ib_destroy_qp_user).  The removal must wait for the
# teardown instead.
NOANS_OUT=/tmp/rstream_noanswer.out
device_removed_during_setup_teardown() {
	addr=${RSTREAM_ADDR4:-192.0.2.1}
	wait_no_sockets 30 || die "sockets of earlier cases remain"
	"$DIR/rstream_rpeer" server rsocket "$addr" 20216 no_answer 120 \
		> $NOANS_OUT 2>&1 &
	peer=$!
	i=0
	until grep -q listening $NOANS_OUT; do
		i=$((i + 1))
		[ $i -gt 100 ] && { kill $peer; die "no rdma_cm listener: $(cat $NOANS_OUT)"; }
		sleep 0.1
	done
	cmd_start "$DIR/rstream_cmd" socket,1 connect_nb,1,$addr,20216 \
		pause poll,1 close,1 pause
	cmd_wait_pause 1
	# The QP is made once the route is resolved, before the request goes.
	i=0
	until rdma resource show qp | grep -q "comm \[rstream\]"; do
		i=$((i + 1))
		[ $i -gt 100 ] && { kill $peer $CMD_PID; die "no QP of rstream's after 10 s"; }
		sleep 0.1
	done
	modprobe rstream_test_stall delay_ms=3000 ||
		{ kill $peer $CMD_PID; die "cannot load rstream_test_stall"; }
	mark_log
	kill -USR1 $CMD_PID
	i=0
	until new_log | grep -q "holding up rstream_conn_destroy, called from rstream_conn_stop"; do
		i=$((i + 1))
		[ $i -gt 100 ] && { kill $peer $CMD_PID; rmmod rstream_test_stall; die "the teardown never reached rstream_conn_destroy"; }
		sleep 0.1
	done
	# The id is gone: the listener is no longer needed, and its open
	# verbs context would hold up the removal (rxe cannot disassociate).
	kill $peer
	wait $peer
	rdma link delete rxe0 || die "cannot delete rxe0"
	rmmod rstream_test_stall
	kill -USR1 $CMD_PID
	cmd_end
	new_log | grep -q "WARNING\|BUG" && die "$(new_log | grep -m 3 "WARNING\|BUG")"
	# Still being set up when it closed: "none".
	expect_steps "socket: ok" "connect_nb: EINPROGRESS" "pause: waiting" \
		"pause: ok" "poll: ok none" "close: ok" "pause: waiting" \
		"pause: ok"
	rxe0_back
	wait_no_sockets 30 || die "sockets remain 30 s after the removal"
	"$DIR/rstream_xfer" loop "$addr" 20217 -s 65536 -n 16 -T 60 ||
		die "no connection on rxe0 re-added"
}

driver_unloaded_under_rstream() {
	rmmod rdma_rxe || die "cannot unload rdma_rxe"
	wait_listed rxe0 roce no
	modprobe rdma_rxe || die "cannot load rdma_rxe"
	rxe0_back
}

# The device goes while connections and a listener use it: its removal
# completes (rstream frees everything on it), the transfers fail at once
# instead of hanging, and connections work again on the device re-added.
device_removed_under_connections() {
	addr=${RSTREAM_ADDR4:-192.0.2.1}
	"$DIR/rstream_xfer" loop "$addr" 20201 -c 4 -d -s 1048576 -n 100000 \
		-T 300 > /tmp/rstream_removed.out 2>&1 &
	pid=$!
	i=0
	until [ "$(rdma res show qp 2>/dev/null | grep -c 'comm \[rstream\]')" -ge 8 ]; do
		i=$((i + 1))
		[ $i -gt 300 ] && die "no rstream connections after 30 s"
		sleep 0.1
	done
	sleep 1
	timeout 60 rdma link delete rxe0 || die "rdma link delete rxe0 failed"
	i=0
	while kill -0 $pid 2>/dev/null; do
		i=$((i + 1))
		[ $i -gt 300 ] && { kill $pid; die "transfers still running 30 s after the device went"; }
		sleep 0.1
	done
	wait $pid && die "transfers went on without their device: $(cat /tmp/rstream_removed.out)"
	rxe0_back
	"$DIR/rstream_xfer" loop "$addr" 20202 -s 65536 -n 16 -T 60 ||
		die "no connection on rxe0 re-added"
}

TESTS="rxe0_is_listed"
rdma link show siw0/1 >/dev/null 2>&1 && TESTS="$TESTS siw0_is_listed"
# shellcheck disable=SC2086 # a list of function names
run_tests $TESTS devices_seen_in_new_netns device_added_while_loaded \
	device_removed_while_loaded device_renamed_while_loaded \
	devices_come_and_go \
	unload_and_reload_with_devices_present open_socket_pins_module \
	socket_loads_module \
	device_removed_under_connections listen_after_device_removal \
	listener_loses_its_device transparent_listener_loses_rdma \
	device_removed_while_sockets_close \
	device_removed_during_setup_teardown driver_unloaded_under_rstream
