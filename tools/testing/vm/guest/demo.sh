#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# What `make run` shows: the guest's kernel, its soft-RDMA devices, rstream
# loaded with its parameters, and an AF_RSTREAM socket being created.

family=$(cat /sys/module/rstream/parameters/family)
echo "kernel        $(uname -r)"
echo "rdma links    $(rdma link show | tr '\n' ';')"
echo "addresses     $(ip -br addr show d0 | tr -s ' ')"
echo "rstream       $(modinfo -F version rstream), registered as family $family"
for p in /sys/module/rstream/parameters/*; do
	printf '  %-16s %s\n' "$(basename "$p")" "$(cat "$p")"
done
echo "devices seen by rstream (/proc/net/rstream/devices):"
sed 's/^/  /' /proc/net/rstream/devices
printf 'socket(%s, SOCK_STREAM, 0): ' "$family"
/usr/lib/rstream/selftests/rstream_sock "$family"
echo "a verified stream both ways over rxe0 (AF_RSTREAM client and server):"
/usr/lib/rstream/selftests/rstream_smoke 192.0.2.1 7471 65536 64 2>&1 | sed 's/^/  /'
S=/usr/lib/rstream/selftests/rstream_smoke
PRE=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
echo "the same with a userspace rsocket (librspreload.so) at one end:"
$S server 192.0.2.1 7472 65536 64 2>&1 | sed 's/^/  kernel server: /' &
sleep 1
RSTREAM_SMOKE_INET=1 LD_PRELOAD=$PRE timeout 60 $S client 192.0.2.1 7472 65536 64 ||
	echo "  userspace client failed"
wait
RSTREAM_SMOKE_INET=1 LD_PRELOAD=$PRE timeout 60 \
	$S server 192.0.2.1 7473 65536 64 2>&1 | sed 's/^/  userspace server: /' &
sleep 2
timeout 60 $S client 192.0.2.1 7473 65536 64 || echo "  kernel client failed"
wait
