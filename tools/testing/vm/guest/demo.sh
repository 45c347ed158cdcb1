#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# What `make run` shows: the guest's kernel, its soft-RDMA devices, rstream
# loaded with its parameters, an AF_RSTREAM socket being created, streams
# checked both ways (also against a userspace rsocket), and rstream(1)'s
# default run over AF_RSTREAM, userspace rsockets and TCP side by side.

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

# rstream(1)'s default run (latency, then bandwidth) three ways over the
# same rxe0: our tool on AF_RSTREAM, rdma-core's tool on userspace
# rsockets, and our tool on kernel TCP (-T s).
OURS=/usr/lib/rstream/selftests/rstream
bench() {	# bench <tool> <port> <options>...
	tool=$1
	port=$2
	shift 2
	"$tool" -p "$port" "$@" > /tmp/bench-server.$port 2>&1 &
	i=0
	until out=$("$tool" -s 192.0.2.1 -f ip -p "$port" "$@" 2>&1); do
		i=$((i + 1))
		if [ $i -ge 50 ]; then
			echo "$out"
			break
		fi
		sleep 0.2
	done
	wait
	echo "$out"
}
echo "rstream default run, three ways over rxe0 (times under TCG, not hardware):"
bench "$OURS" 7481 > /tmp/bench.rstream
bench /usr/bin/rstream 7482 > /tmp/bench.rsocket
bench "$OURS" 7483 -T s > /tmp/bench.tcp
awk '
	FNR == 1 { file++ }
	/^name/ || NF != 8 { next }
	{ key[FNR] = $1; rows = FNR > rows ? FNR : rows
	  gb[file, FNR] = $7; us[file, FNR] = $8 }
	END {
		printf "%-10s %-22s %-22s %-22s\n", "", "AF_RSTREAM (kernel)",
		       "rsockets (rdma-core)", "TCP"
		printf "%-10s", "name"
		for (f = 1; f <= 3; f++) printf " %9s %12s", "Gb/sec", "usec/xfer"
		printf "\n"
		for (r = 1; r <= rows; r++) {
			if (!(r in key)) continue
			printf "%-10s", key[r]
			for (f = 1; f <= 3; f++)
				printf " %9s %12s", gb[f, r] == "" ? "-" : gb[f, r],
				       us[f, r] == "" ? "-" : us[f, r]
			printf "\n"
		}
	}' /tmp/bench.rstream /tmp/bench.rsocket /tmp/bench.tcp
