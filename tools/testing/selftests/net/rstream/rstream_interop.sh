#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Wire interop with rdma-core: our rstream(1) over AF_RSTREAM against
# rdma-core's rstream over userspace rsockets (librdmacm 44), each end in
# turn the server, with -T v (every byte checked against the pattern both
# tools use).  Custom runs of 1 B to 1 MiB transfers on 4 KiB rings
# (-B 4096: many grants, credit starvation) and with blocking calls (-T b),
# and of 1 B on default rings; then the default two-connection sequence
# (latency, then bandwidth) each way (its runs at a tenth if the rig asks,
# below); -T s against rdma-core's -T s; a bad command line.  A case fails if
# either tool fails, prints no result line, or reaches its time limit.

. "$(dirname "$0")/lib.sh"

ADDR4=${RSTREAM_ADDR4:-192.0.2.1}
OURS=$DIR/rstream
THEIRS=/usr/bin/rstream
SCALE=${RSTREAM_TIME_SCALE:-1}

# Both tools busy-poll (nonblocking calls in a loop, as rdma-core's does by
# default).  A real RNIC does its work beside them; soft-RoCE does it in
# kworkers that share the guest's two CPUs with them, and at equal
# priority got half a CPU where it needed one.  At nice 19 the tools yield:
# on the debug kernel 64-byte round trips went from 3.6 to 3.0-3.2 ms in
# make check's default sequences (2.5 ms in a short run alone).
renice -n 19 -p $$ > /dev/null || die "renice failed"

# listening <port>: something listens on <port>, through rdma_cm (rdma-core's
# tool and ours over rsockets) or over kernel TCP (-T s).
listening() {
	rdma res show cm_id 2>/dev/null | grep "state LISTEN" |
		grep -q ":$1 " && return 0
	grep -q "$(printf ':%04X ' "$1")[0-9A-F:]* 0A " \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# children <pid>: the pids whose parent is <pid> (the guest has no pgrep).
children() {
	grep -l "^PPid:[[:space:]]*$1\$" /proc/[0-9]*/status 2>/dev/null |
		cut -d/ -f3
}

# What the server's processes are doing, what rdma_cm holds, what the
# kernel said last: printed when a pair fails, so that the failure says
# which end stopped and where.
pair_state() {
	for pid in $spid $(children "$spid"); do
		[ -d "/proc/$pid" ] || continue
		echo "server pid $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline")"
		for task in /proc/"$pid"/task/*; do
			echo "  task ${task##*/}: $(grep '^State' "$task/status")," \
			     "wchan $(cat "$task/wchan")," \
			     "syscall $(cut -d' ' -f1-3 "$task/syscall")"
			sed 's/^/    /' "$task/stack" 2>/dev/null
		done
	done
	echo "rdma_cm ids:"
	rdma res show cm_id 2>&1 | sed 's/^/  /'
	echo "queue pairs:"
	rdma res show qp 2>&1 | sed 's/^/  /'
	echo "kernel log, last lines:"
	dmesg | tail -n 8 | sed 's/^/  /'
	echo "server said: $(cat "$sout")"
}

# pair <server tool> <client tool> <port> <limit in s> <options>...:
# the server in the background; once it listens, the client; both must
# pass.  The client runs once: with the server listening, a refused
# connection is a failure.
pair() {
	server=$1
	client=$2
	port=$3
	limit=$(($4 * SCALE))
	shift 4
	sout=/tmp/interop-server.$port
	timeout "$limit" "$server" -p "$port" "$@" > "$sout" 2>&1 &
	spid=$!
	# rdma-core's tool says nothing until it exits (stdout is a file):
	# rdma_cm's table says when it listens.
	listen_limit=$((30 * SCALE))
	tenths=0
	until listening "$port"; do
		if ! kill -0 $spid 2>/dev/null; then
			wait $spid
			die "server $server $* exited (status $?) before it listened on port $port: $(cat "$sout")"
		fi
		tenths=$((tenths + 1))
		if [ $tenths -gt $((listen_limit * 10)) ]; then
			state=$(pair_state)
			kill $spid 2>/dev/null
			wait $spid
			die "server $server $* not listening on port $port after $listen_limit s
$state"
		fi
		sleep 0.1
	done
	started=$(date +%s)
	cout=$(timeout "$limit" "$client" -s "$ADDR4" -f ip -p "$port" "$@" 2>&1)
	status=$?
	if [ $status -ne 0 ]; then
		state=$(pair_state)
		kill $spid 2>/dev/null
		wait $spid
		[ $status -eq 124 ] && status="124, killed at the limit"
		die "client $client $* failed with the server listening (status $status after $(($(date +%s) - started)) s, limit ${limit} s): $(echo "$cout" | grep -v '^name' | head -n 3 | tr '\n' ' ')
client said: $cout
$state"
	fi
	wait $spid || die "server $server $* failed (limit ${limit} s): $(cat "$sout")
client said: $cout"
	lines=$(echo "$cout" | grep -vc '^name')
	[ "$lines" -ge 1 ] || die "client printed no result: $cout"
	[ "$(grep -vc '^name' "$sout")" -eq "$lines" ] ||
		die "server and client results differ: $(cat "$sout") / $cout"
	echo "$cout" | tail -n +2
}

custom() {	# custom <direction> <port> <size> <count> <options>...
	dir=$1
	port=$2
	size=$3
	count=$4
	shift 4
	if [ "$dir" = ours_serve ]; then
		pair "$OURS" "$THEIRS" "$port" 60 -T v -S "$size" -C "$count" "$@"
	else
		pair "$THEIRS" "$OURS" "$port" 60 -T v -S "$size" -C "$count" "$@"
	fi
}

CASES=
port=7500
for dir in ours_serve theirs_serve; do
	for variant in default small_rings blocking; do
		case $variant in
		default) opts= ;;
		small_rings) opts="-B 4096" ;;
		blocking) opts="-T b" ;;
		esac
		for sc in 1:1000 64:1000 4096:200 65536:50 1048576:10; do
			size=${sc%:*}
			count=${sc#*:}
			port=$((port + 1))
			# The default sequence (in full, or its runs at a
			# tenth) carries these sizes with these options
			# already, each way.
			[ $variant = default ] && [ "$size" != 1 ] && continue
			name=${dir}_${variant}_${size}
			eval "$name() { custom $dir $port $size $count $opts; }"
			CASES="$CASES $name"
		done
	done
done

ours_serve_default_sequence() { pair "$OURS" "$THEIRS" 7591 300 -T v; }
theirs_serve_default_sequence() { pair "$THEIRS" "$OURS" 7592 300 -T v; }

# The default sequence's eight runs with a tenth of the transfers, each
# as a custom run on a connection of its own: latency (-C 1, -I n), then
# bandwidth (-I 1, -C n), at 64 B, 4 KiB, 64 KiB and 1 MiB.
tenth_sequence() {	# tenth_sequence <server tool> <client tool> <port>
	port=$3
	for run in 64:1:10000 4096:1:1000 65536:1:100 1048576:1:10 \
		   64:10000:1 4096:1000:1 65536:100:1 1048576:10:1; do
		size=${run%%:*}
		count=${run#*:}
		iters=${count#*:}
		count=${count%:*}
		pair "$1" "$2" "$port" 120 -T v -S "$size" -C "$count" -I "$iters" ||
			return 1
		port=$((port + 1))
	done
}
ours_serve_default_sequence_at_a_tenth() { tenth_sequence "$OURS" "$THEIRS" 7801; }
theirs_serve_default_sequence_at_a_tenth() { tenth_sequence "$THEIRS" "$OURS" 7811; }

# The default sequence in full, unless the rig asks for less
# (RSTREAM_VOLUME=reduced: on every kernel but 6.12, unless make check is
# given RSTREAM_FULL=1), where both directions run the same eight runs at
# a tenth.  The debug kernel (KASAN, lockdep,
# kmemleak, all under TCG) takes 11-13 min for one full sequence (64_lat
# alone: 100,000 round trips of 3 ms) against 40-80 s on the stock ones.
if [ "${RSTREAM_VOLUME:-full}" = reduced ]; then
	SEQUENCES="ours_serve_default_sequence_at_a_tenth theirs_serve_default_sequence_at_a_tenth"
else
	SEQUENCES="ours_serve_default_sequence theirs_serve_default_sequence"
fi

# -T s: the same test over kernel TCP, against rdma-core's -T s.
tcp_both_tools() {
	pair "$OURS" "$THEIRS" 7593 60 -T s -T v -S 65536 -C 100
	pair "$THEIRS" "$OURS" 7594 60 -T s -T v -S 65536 -C 100
}

# A bad command line prints the usage and fails; --help succeeds.
command_line() {
	for bad in "-T x" "-S abc" "-I 0" "-C -1" "-B 1x" "-f gid" "-q" "extra"; do
		# shellcheck disable=SC2086 # the options are words
		if out=$("$OURS" $bad 2>&1); then
			die "rstream $bad succeeded"
		fi
		echo "$out" | grep -q "^usage:" || die "rstream $bad: no usage: $out"
	done
	"$OURS" --help | grep -q "^usage:" || die "--help prints no usage"
	"$OURS" -h > /dev/null || die "-h fails"
}

# shellcheck disable=SC2086 # the case names are words
run_tests command_line $CASES tcp_both_tools $SEQUENCES
