#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Data integrity over AF_RSTREAM: rstream_xfer moves a checked byte pattern
# from a client to the server it forks (and back, with -d) over the
# guest's RDMA device, at RSTREAM_ADDR4 and RSTREAM_ADDR6.  Sends of sizes
# around the inline, 2 KiB and 64 KiB boundaries, on default buffers and
# on the smallest (-b 4096); many small sends; a long stream; both
# directions at once; many connections.  A case fails if rstream_xfer
# fails or reaches its time limit (-T).  Each case has a port of its own:
# the port space is rdma_cm's, not TCP's.

. "$(dirname "$0")/lib.sh"

ADDR4=${RSTREAM_ADDR4:-192.0.2.1}
ADDR6=${RSTREAM_ADDR6:-2001:db8::1}

# xfer <address> <port> <time limit in s> <rstream_xfer options>...
xfer() {
	addr=$1
	port=$2
	limit=$3
	shift 3
	# Slow kernels (the debug one) get more time: the rig sets the scale.
	limit=$((limit * ${RSTREAM_TIME_SCALE:-1}))
	# Kernel memory around each case: growth that stays is a leak.
	echo "slab before: $(grep SUnreclaim /proc/meminfo)"
	"$DIR/rstream_xfer" loop "$addr" "$port" -T "$limit" "$@" ||
		die "rstream_xfer loop $addr $port -T $limit $* failed
slab after: $(grep SUnreclaim /proc/meminfo)"
	echo "slab after: $(grep SUnreclaim /proc/meminfo)"
}

send_1() { xfer "$ADDR4" 20101 30 -s 1 -n 20; }
send_63() { xfer "$ADDR4" 20102 30 -s 63 -n 20; }
send_64() { xfer "$ADDR4" 20103 30 -s 64 -n 20; }
send_65() { xfer "$ADDR4" 20104 30 -s 65 -n 20; }
send_2048() { xfer "$ADDR4" 20105 30 -s 2048 -n 20; }
send_4096() { xfer "$ADDR4" 20106 30 -s 4096 -n 20; }
send_65535() { xfer "$ADDR4" 20107 30 -s 65535 -n 20; }
send_65536() { xfer "$ADDR4" 20108 30 -s 65536 -n 20; }
send_65537() { xfer "$ADDR4" 20109 30 -s 65537 -n 20; }
send_1m() { xfer "$ADDR4" 20110 30 -s 1048576 -n 20; }
send_8m() { xfer "$ADDR4" 20111 30 -s 8388608 -n 3; }

send_1_tiny_buffers() { xfer "$ADDR4" 20121 30 -s 1 -n 20 -b 4096; }
send_63_tiny_buffers() { xfer "$ADDR4" 20122 30 -s 63 -n 20 -b 4096; }
send_64_tiny_buffers() { xfer "$ADDR4" 20123 30 -s 64 -n 20 -b 4096; }
send_65_tiny_buffers() { xfer "$ADDR4" 20124 30 -s 65 -n 20 -b 4096; }
send_2048_tiny_buffers() { xfer "$ADDR4" 20125 30 -s 2048 -n 20 -b 4096; }
send_4096_tiny_buffers() { xfer "$ADDR4" 20126 30 -s 4096 -n 20 -b 4096; }
send_65535_tiny_buffers() { xfer "$ADDR4" 20127 30 -s 65535 -n 20 -b 4096; }
send_65536_tiny_buffers() { xfer "$ADDR4" 20128 30 -s 65536 -n 20 -b 4096; }
send_65537_tiny_buffers() { xfer "$ADDR4" 20129 30 -s 65537 -n 20 -b 4096; }
send_1m_tiny_buffers() { xfer "$ADDR4" 20130 30 -s 1048576 -n 20 -b 4096; }
send_8m_tiny_buffers() { xfer "$ADDR4" 20131 30 -s 8388608 -n 3 -b 4096; }

many_small_sends() { xfer "$ADDR4" 20141 60 -s 64 -n 200000; }
one_gib_streamed() { xfer "$ADDR4" 20142 60 -s 1048576 -n 1024; }

both_directions() { xfer "$ADDR4" 20151 30 -s 65536 -n 64 -d; }
both_directions_odd_sizes() { xfer "$ADDR4" 20152 30 -s 65537 -n 20 -d; }
both_directions_tiny_buffers() { xfer "$ADDR4" 20153 30 -s 65537 -n 20 -d -b 4096; }
hundred_connections() { xfer "$ADDR4" 20161 60 -c 100 -s 65536 -n 4; }
hundred_connections_both_directions() {
	xfer "$ADDR4" 20162 60 -c 100 -s 65536 -n 4 -d
}

ipv6_send_65537() { xfer "$ADDR6" 20171 30 -s 65537 -n 20; }
ipv6_send_1m_tiny_buffers() { xfer "$ADDR6" 20172 30 -s 1048576 -n 4 -b 4096; }
ipv6_both_directions() { xfer "$ADDR6" 20173 30 -s 65536 -n 64 -d; }
ipv6_ten_connections() { xfer "$ADDR6" 20174 30 -c 10 -s 65536 -n 4 -d; }

run_tests send_1 send_63 send_64 send_65 send_2048 send_4096 send_65535 \
	send_65536 send_65537 send_1m send_8m \
	send_1_tiny_buffers send_63_tiny_buffers send_64_tiny_buffers \
	send_65_tiny_buffers send_2048_tiny_buffers send_4096_tiny_buffers \
	send_65535_tiny_buffers send_65536_tiny_buffers \
	send_65537_tiny_buffers send_1m_tiny_buffers send_8m_tiny_buffers \
	many_small_sends one_gib_streamed \
	both_directions both_directions_odd_sizes both_directions_tiny_buffers \
	hundred_connections hundred_connections_both_directions \
	ipv6_send_65537 ipv6_send_1m_tiny_buffers ipv6_both_directions \
	ipv6_ten_connections
