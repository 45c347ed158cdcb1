#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Transparent sockets (rstream_transparent): the test program runs under
# rstream-run, as a converted program would, with a netdev that has no
# RDMA device and no address (RSTREAM_NODEV) for SO_BINDTODEVICE to point
# at.  Its KTAP is this suite's.

DIR=$(cd "$(dirname "$0")" && pwd)
RSTREAM_NODEV=rsnodev0
export RSTREAM_NODEV RSTREAM_PRELOAD="$DIR/librstream-preload.so"

ip link add "$RSTREAM_NODEV" type dummy 2>/dev/null
ip link set "$RSTREAM_NODEV" up
trap 'ip link delete "$RSTREAM_NODEV" 2>/dev/null' EXIT
"$DIR/rstream-run" "$DIR/rstream_transparent"
