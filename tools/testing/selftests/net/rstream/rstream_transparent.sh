#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Transparent sockets (rstream_transparent): the test program runs under
# rstream-run, as a converted program would, with a netdev that has no
# RDMA device (RSTREAM_NODEV) and addresses of its own that route nowhere
# else (RSTREAM_NODEV_ADDR4, _ADDR6): for SO_BINDTODEVICE to point at, and
# for a listener RDMA cannot listen on.  Its KTAP is this suite's.

DIR=$(cd "$(dirname "$0")" && pwd)
RSTREAM_NODEV=rsnodev0
RSTREAM_NODEV_ADDR4=198.51.100.201
RSTREAM_NODEV_ADDR6=2001:db8:77::1
export RSTREAM_NODEV RSTREAM_NODEV_ADDR4 RSTREAM_NODEV_ADDR6
export RSTREAM_PRELOAD="$DIR/librstream-preload.so"

ip link add "$RSTREAM_NODEV" type dummy 2>/dev/null
ip addr add "$RSTREAM_NODEV_ADDR4/32" dev "$RSTREAM_NODEV"
ip -6 addr add "$RSTREAM_NODEV_ADDR6/128" dev "$RSTREAM_NODEV" nodad
ip link set "$RSTREAM_NODEV" up
# Policy routing that sends IPv4 traffic with this mark nowhere, for
# SO_MARK's test: the test's addresses are local, so the local table's
# rule moves behind the mark's rule for the suite's time.
RSTREAM_UNREACHABLE_MARK=119
export RSTREAM_UNREACHABLE_MARK
ip rule add pref 100 lookup local
ip rule del pref 0 lookup local
ip rule add pref 50 fwmark $RSTREAM_UNREACHABLE_MARK lookup 119
ip route add unreachable default table 119
trap 'ip link delete "$RSTREAM_NODEV" 2>/dev/null
      ip rule del pref 50
      ip rule add pref 0 lookup local
      ip rule del pref 100
      ip route flush table 119' EXIT
"$DIR/rstream-run" "$DIR/rstream_transparent"
