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
