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
	rmmod rstream || die "cannot unload rstream"
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
	device_removed_under_connections driver_unloaded_under_rstream
