#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# What `make bench` measures, in one guest, over one soft-RoCE device
# (rxe0): rstream(1)'s default sequence over AF_RSTREAM, rdma-core's
# rstream over userspace rsockets and our tool over TCP, and our tool's
# TCP mode through rstream-run, whose transparent sockets connect over
# RDMA (-n) or stay on TCP (-c none -l none: every call forwarded to the
# TCP sockets inside, at both ends); raw RDMA writes
# (ib_write_lat, ib_write_bw) at the sizes the targets compare with; then
# 1,000 connections held open and set up one after another, over
# AF_RSTREAM, rsockets and TCP; and real programs (iperf3, redis) over
# AF_RSTREAM through rstream-run beside the same programs over TCP.
# Every measurement is repeated
# RSTREAM_BENCH_RUNS times, interleaved so that drift hits all alike.
#
# Output, one figure per line, for the host (rig/bench.py) to reduce:
#   R <tool> <run> <test> <Gb/s> <usec/xfer>     rstream(1) results
#   U <tool> <run> <CPU seconds> <bytes>         what a whole sequence cost
#   L <run> <bytes> <usec typical>               ib_write_lat
#   W <run> <bytes> <Gb/s>                       ib_write_bw
#   K, KC, KS, KF <run> <bytes> <usec>           kernel QPs (kraw_lat,
#                                                kraw_calls)
#   C <af> <run> <conns> <ms> <KiB used>         held connections
#   A <figure> <af> <run> <value>                real programs
# Anything else is shown as it is.
#
# RSTREAM_BENCH_ONLY (words: stream, zc, block, busy, transparent, raw,
# conn, apps) limits what runs;
# RSTREAM_BENCH_PERF="<tool>:<test> ..." records a system-wide profile
# (perf, call graphs) while each test named runs in the first repetition;
# conn:rstream and conn:tcp name the 1,000 connects.

RUNS=${RSTREAM_BENCH_RUNS:-3}
ONLY=${RSTREAM_BENCH_ONLY:-"stream zc block busy transparent raw conn apps"}
ADDR=192.0.2.1
OURS=/usr/lib/rstream/selftests/rstream
CMD=/usr/lib/rstream/selftests/rstream_cmd
RPEER=/usr/lib/rstream/selftests/rstream_rpeer
RUNNER=/usr/lib/rstream/selftests/rstream-run
RSTREAM_PRELOAD=/usr/lib/rstream/selftests/librstream-preload.so
export RSTREAM_PRELOAD
CONNS=1000
PORT=7600

wants() { case " $ONLY " in *" $1 "*) return 0 ;; esac; return 1; }

# Sizes as rstream(1) prints them, and as perftest wants them.
raw_bytes() { case $1 in 64) echo 64 ;; 4k) echo 4096 ;; 64k) echo 65536 ;; 1m) echo 1048576 ;; esac; }

# perf_rec <command>...: sample the CPU clock (TCG has no PMU) on both
# CPUs, with call graphs, while <command> runs.
perf_rec() {
	perf record -e cpu-clock -F 499 -a -g -o /tmp/perf.data "$@" \
		> /tmp/perf.record 2>&1
}

# A profile while <tool>'s <test> runs.
perf_start() {	# perf_start <tool> <run>
	[ -n "$RSTREAM_BENCH_PERF" ] && [ "$2" = 1 ] || return 0
	test=
	for w in $RSTREAM_BENCH_PERF; do
		case $w in "$1":*) test=${w#*:} ;; esac
	done
	[ -n "$test" ] || return 0
	perf_what="$1:$test"
	rm -f /tmp/perf.finished
	case $1 in rsockets*)
		# rdma-core's rstream prints nothing until it ends (stdout
		# to a file is fully buffered): only its first test, which
		# runs for seconds, can be profiled, from 1 s to 5 s; so in
		# every column of it (rsockets, rsockets_blk, rsockets_busy).
		[ "$test" = 64_lat ] || return 0
		(
			sleep 1
			perf_rec -- sleep 4
			echo finished > /tmp/perf.finished
		) &
		return 0
		;;
	esac
	(
		# Start when the tool prints the test before it; stop after it.
		until grep -q "^$(prev_test "$test") " "/tmp/bench-client.$1" 2>/dev/null; do
			sleep 0.05
		done
		# Looking once a second, not ten times: at 0.1 s the look's
		# sh, grep and sleep took 12.6% of the samples of a profile
		# of rstream_busy:64_lat at 7949ec4 (6.1), and that run's
		# 64_lat came out at 2.15 times rsockets' (whose profile has
		# no such loop) against 1.25-1.41 without a profile.
		perf_rec -- sh -c "until grep -q '^$test ' /tmp/bench-client.$1; do sleep 1; done"
		echo finished > /tmp/perf.finished
	) &
}

prev_test() {	# the test of the default sequence before $1
	case $1 in
	64_lat) echo name ;; 4k_lat) echo 64_lat ;; 64k_lat) echo 4k_lat ;;
	1m_lat) echo 64k_lat ;; 64_bw) echo 1m_lat ;; 4k_bw) echo 64_bw ;;
	64k_bw) echo 4k_bw ;; 1m_bw) echo 64k_bw ;;
	esac
}

perf_report() {
	[ -f /tmp/perf.data ] || return 0
	i=0
	until [ -f /tmp/perf.finished ] || [ $i -ge 100 ]; do
		i=$((i + 1))
		sleep 0.1
	done
	echo "# profile of $perf_what (perf, cpu-clock, both CPUs)"
	perf report -i /tmp/perf.data --stdio --no-children --sort sym \
		--percent-limit 0.7 -g none 2>/dev/null | grep -v '^$' |
		sed 's/^/P /' | head -n 70
	perf report -i /tmp/perf.data --stdio --no-children --sort dso \
		-g none 2>/dev/null | grep '%' | sed 's/^/P /' | head -n 12
	perf report -i /tmp/perf.data --stdio --no-children --sort comm \
		-g none 2>/dev/null | grep '%' | sed 's/^/P /' | head -n 12
	# Who calls the symbols above 4%: the chains that lead there.
	echo "# callers of the symbols above 4%"
	perf report -i /tmp/perf.data --stdio --no-children --sort sym \
		--percent-limit 4 -g caller,1,callee,function,percent \
		2>/dev/null | grep -v '^$' | grep -v '^#' | sed 's/^/P /' |
		head -n 200
	rm -f /tmp/perf.data
}

# CPU time used so far, all CPUs, in hundredths of a second (USER_HZ):
# user, nice, system, irq, softirq and steal.
cpu_busy() {
	awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat
}

# stream_run <tool name> <binary> <port> <options>...: with $wrap (words)
# before the binary at both ends, if set.  Also the CPU time the run
# took, both ends and the kernel, and the bytes it moved.
stream_run() {
	name=$1
	tool=$2
	port=$3
	shift 3
	cpu0=$(cpu_busy)
	# shellcheck disable=SC2086 # the wrapper is words
	$wrap "$tool" -p "$port" "$@" > "/tmp/bench-server.$name" 2>&1 &
	server=$!
	perf_start "$name" "$run"
	i=0
	# shellcheck disable=SC2086
	until $wrap "$tool" -s $ADDR -f ip -p "$port" "$@" > "/tmp/bench-client.$name" 2>&1; do
		i=$((i + 1))
		if [ $i -ge 50 ]; then
			echo "# $name: client failed: $(tail -n 3 "/tmp/bench-client.$name" | tr '\n' ' ')"
			break
		fi
		sleep 0.2
	done
	wait $server
	cpu1=$(cpu_busy)
	awk -v t="$name" -v r="$run" 'NF == 8 && $1 != "name" {
		print "R", t, r, $1, $7, $8 }' "/tmp/bench-client.$name"
	# Bytes: each test's time over its time per transfer, times the size.
	awk -v t="$name" -v r="$run" -v cpu=$((cpu1 - cpu0)) '
		NF == 8 && $1 != "name" && $8 > 0 {
			n = $2; m = 1
			if (n ~ /k$/) m = 1024
			if (n ~ /m$/) m = 1048576
			sub(/[km]$/, "", n)
			b += n * m * ($6 + 0) * 1e6 / $8
		}
		END { if (b) print "U", t, r, cpu / 100, b }' \
		"/tmp/bench-client.$name"
	perf_report
}

# The busy-poll time both tools get in the busy columns, in microseconds:
# longer than any reply of the latency tests takes here.
BUSY_US=1000
RSOCKET_POLLING=/etc/rdma/rsocket/polling_time

# raw_lat <bytes> [<tool> <letter>]: ib_write_lat (L), or ib_send_lat (S),
# whose sends, as rsocket's writes with immediate, each take a receive
# and make a completion that the other side polls for.
raw_lat() {
	tool=${2:-ib_write_lat}
	$tool -d rxe0 -s "$1" -n 1000 > /tmp/raw.server 2>&1 &
	server=$!
	sleep 0.5
	i=0
	until $tool -d rxe0 -s "$1" -n 1000 $ADDR > /tmp/raw.client 2>&1; do
		i=$((i + 1))
		[ $i -ge 20 ] && { echo "# $tool -s $1 failed"; break; }
		sleep 0.3
	done
	wait $server
	awk -v r="$run" -v s="$1" -v l="${3:-L}" '$1 == s && NF >= 5 {
		print l, r, s, $5 }' /tmp/raw.client
}

# kraw_lat <bytes> <round trips> [copy]: the same round trip between two
# kernel QPs, each end spinning on its own CQ, with nothing of a socket
# around them (K): rstream_test_rawlat, the floor under AF_RSTREAM's busy
# rows.  With copy (KC), each end also copies the bytes in from a
# program's memory before its write and out after the peer's, as any
# kernel socket's send and recv must: the floor under a socket's rows.
# The module does it all in its init and stays loaded only if it worked.
kraw_lat() {
	copy=${3:-0} tag=K name=rawlat
	[ "$copy" = 1 ] && tag=KC name=rawlatcopy
	if modprobe rstream_test_rawlat size="$1" iters="$2" copy="$copy" \
	   2> /tmp/kraw.err; then
		rmmod rstream_test_rawlat
		dmesg | sed -n "s/.*rstream_test_rawlat: $name $1 [0-9]* \([0-9.]*\)\$/$tag $run $1 \1/p" |
			tail -n 1
	else
		echo "# rstream_test_rawlat size $1 copy $copy failed: $(cat /tmp/kraw.err)"
	fi
}

# kraw_calls <bytes> <round trips>: the same with a program's system
# calls around each end's copies (KS): rstream_test_rawlat calls=1 makes
# the connection, and rstream_rawcalls's two processes write() and read()
# its devices, each call copying in and posting, or spinning and copying
# out, and nothing more: the floor under a socket's rows, calls and all.
# Then the same ends as sockets of a family of their own (KF, family=23:
# AF_IRDA's number, which no kernel since 4.17 uses), driven with send()
# and recv(): what the socket calls themselves add, which any socket
# family pays.
RAW_FAMILY=23
kraw_calls() {
	for tag in KS KF; do
		fam='' line=rawcalls
		[ $tag = KF ] && fam=$RAW_FAMILY line=rawsockcalls
		if modprobe rstream_test_rawlat size="$1" calls=1 \
		   ${fam:+family=$fam} 2> /tmp/kraw.err; then
			# shellcheck disable=SC2086 # no family: no word
			/usr/lib/rstream/selftests/rstream_rawcalls "$1" "$2" $fam \
				> /tmp/kraw.out 2>> /tmp/kraw.err
			rmmod rstream_test_rawlat
			sed -n "s/^$line $1 [0-9]* \([0-9.]*\)\$/$tag $run $1 \1/p" /tmp/kraw.out
			grep -q "^$line" /tmp/kraw.out ||
				echo "# rstream_rawcalls size $1 $fam failed: $(cat /tmp/kraw.err)"
		else
			echo "# rstream_test_rawlat size $1 calls=1 $fam failed: $(cat /tmp/kraw.err)"
		fi
	done
}

raw_bw() {	# raw_bw <bytes> <iterations>
	ib_write_bw -d rxe0 -s "$1" -n "$2" --report_gbits > /tmp/raw.server 2>&1 &
	server=$!
	sleep 0.5
	i=0
	until ib_write_bw -d rxe0 -s "$1" -n "$2" --report_gbits $ADDR > /tmp/raw.client 2>&1; do
		i=$((i + 1))
		[ $i -ge 20 ] && { echo "# ib_write_bw -s $1 failed"; break; }
		sleep 0.3
	done
	wait $server
	awk -v r="$run" -v s="$1" '$1 == s && NF >= 4 { print "W", r, s, $4 }' /tmp/raw.client
}

# Memory in use: what is neither free nor page cache, in KiB.
mem_used() {
	sync
	echo 3 > /proc/sys/vm/drop_caches
	sleep 1
	awk '/^MemTotal:/ { t = $2 } /^MemFree:/ { f = $2 }
	     /^Buffers:/ { b = $2 } /^Cached:/ { c = $2 }
	     END { print t - f - b - c }' /proc/meminfo
}

# Where the memory goes, by allocation site: vmalloc callers and slabs.
mem_sites() {
	awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[a-z_0-9.]+\+0x/) {
		sub(/\+.*/, "", $i); kb[$i] += $2 / 1024 } }
	     END { for (s in kb) print "vmalloc", s, kb[s] }' /proc/vmallocinfo
	awk 'NR > 2 { print "slab", $1, $3 * $4 / 1024 }' /proc/slabinfo
}

# conn_run <af> <run>: 1,000 connections made one after another to a
# server that accepts and holds them; the time, and the memory both ends
# hold while they stay open.
conn_run() {
	af=$1
	env=""
	[ "$af" = tcp ] && env="RSTREAM_CMD_TCP=1"
	port=$((PORT + run))
	[ "$af" = tcp ] && port=$((port + 50))
	[ "$af" = rsockets ] && port=$((port + 25))
	serve="$CMD serve,$ADDR,$port"
	fill="$CMD fill,$ADDR,$port,$CONNS pause"
	if [ "$af" = rsockets ]; then
		# The same, through librdmacm's rsocket API.
		serve="$RPEER server rsocket $ADDR $port connects=$CONNS"
		fill="$RPEER client rsocket $ADDR $port connects=$CONNS"
	fi
	ulimit -n 4096
	before=$(mem_used)
	[ "$run" = 1 ] && mem_sites > /tmp/sites.before
	# shellcheck disable=SC2086 # the commands are words
	env $env $serve > /tmp/conn.serve 2>&1 &
	server=$!
	sleep 1
	perf=
	case " $RSTREAM_BENCH_PERF " in *" conn:$af "*)
		[ "$run" = 1 ] && {
			perf_what="conn:$af"
			# perf itself, not a subshell: it gets the SIGINT.
			perf record -e cpu-clock -F 499 -a -g -o /tmp/perf.data \
				> /tmp/perf.record 2>&1 &
			perf=$!
		} ;;
	esac
	# shellcheck disable=SC2086
	env $env $fill > /tmp/conn.fill 2>&1 &
	client=$!
	# The client times the connects itself.  Look once a second: each
	# look forks grep and sleep, which under TCG cost the CPUs enough to
	# slow the connects they are waiting for (at ten looks a second they
	# took a tenth of a profile of them).
	# rsockets' set-up is slower: up to 600 s for its 1,000.
	limit=120
	[ "$af" = rsockets ] && limit=600
	# A run whose progress stopped for 30 s has stalled: rdma-core's
	# rsocket server stops accepting near 200 connections in one
	# process (its threads wait on each other: raccept() reading its
	# queue, another thread blocked writing to a socket pair); what it
	# made by then is what it is measured on.
	i=0
	seen=
	still=0
	until grep -q "^pause:" /tmp/conn.fill || [ $i -ge $limit ] ||
	      [ $still -ge 30 ]; do
		i=$((i + 1))
		sleep 1
		last=$(grep "^progress:" /tmp/conn.fill | tail -n 1)
		if [ "$last" = "$seen" ]; then
			still=$((still + 1))
		else
			seen=$last
			still=0
		fi
	done
	if [ -n "$perf" ]; then
		kill -INT $perf
		wait $perf
		echo finished > /tmp/perf.finished
		perf_report
	fi
	sleep 2
	after=$(mem_used)
	if [ "$run" = 1 ]; then
		mem_sites > /tmp/sites.after
		awk -v n="$CONNS" -v af="$af" '
			NR == FNR { b[$1 " " $2] = $3; next }
			{ d = $3 - b[$1 " " $2]; if (d > 0.5 * n / 1000 * 2)
				printf "M %s %s %s %.1f\n", af, $1, $2, d * 1024 / (2 * n) }' \
			/tmp/sites.before /tmp/sites.after | sort -k5 -g -r | head -n 12
	fi
	# All of them, or (a run that stalled) as many as its last progress
	# line counts, in the time it gives.
	made=$(awk '/^fill: [0-9]+ made$/ { n = $2 } /^fill-time:/ { t = $2 }
		    /^progress: [0-9]+ in / { pn = $2; pt = $4 }
		    END { if (n) print n, t; else if (pn) print pn, pt }' \
		/tmp/conn.fill)
	grep -q "^fill: [0-9]* made$" /tmp/conn.fill ||
		echo "# $af: not all $CONNS made (progress stopped, or ${limit} s up); figures of the ${made%% *} made: $(tail -n 2 /tmp/conn.fill | tr '\n' ' ')"
	echo "C $af $run ${made:-0 0} $((after - before))"
	kill -USR1 $client $server 2>/dev/null
	wait $client $server
	# Closed connections end in the background; the next run starts clean.
	sleep 3
}

# app_client <log> <command>...: a client, retried while its server is
# still starting (each try refused); its output in <log>.  iperf3 -J exits
# 0 on a refused connection: the error is in its JSON.
app_client() {
	log=$1
	shift
	i=0
	until timeout 120 "$@" > "$log" 2>&1 && ! grep -q '"error":' "$log"; do
		i=$((i + 1))
		if [ $i -ge 50 ]; then
			echo "# $*: $(tail -n 3 "$log" | tr '\n' ' ')"
			return 1
		fi
		sleep 0.2
	done
}

# apps_run <af>: iperf3, one stream for 4 s, and redis-benchmark's SET and
# GET (4 clients, 5,000 requests each), over AF_RSTREAM (both ends run by
# rstream-run -n: no fallback to TCP), over TCP, or over transparent
# sockets kept on TCP (ttcp: rstream-run -c none -l none at both ends).
apps_run() {
	af=$1
	wrap=
	[ "$af" = rstream ] && wrap="$RUNNER -n"
	[ "$af" = ttcp ] && wrap="$RUNNER -c none -l none"
	port=$((PORT + 100 + run))
	[ "$af" = tcp ] && port=$((port + 50))
	[ "$af" = ttcp ] && port=$((port + 250))
	# shellcheck disable=SC2086 # the wrapper is words
	timeout 120 $wrap iperf3 -s -1 -B $ADDR -p $port > /tmp/app.server 2>&1 &
	server=$!
	# shellcheck disable=SC2086
	app_client /tmp/app.json $wrap iperf3 -c $ADDR -p $port -t 4 -J
	wait $server || echo "# iperf3 server over $af: $(tail -n 3 /tmp/app.server | tr '\n' ' ')"
	awk -v af="$af" -v r="$run" '$1 == "\"sum_received\":" { f = 1 }
		f && $1 == "\"bits_per_second\":" {
			printf "A iperf3_gbps %s %s %.4f\n", af, r, $2 / 1e9; exit }' \
		/tmp/app.json
	# A port of its own: iperf3's connections may still be closing.
	port=$((port + 20))
	# shellcheck disable=SC2086
	timeout 300 $wrap redis-server --bind $ADDR --port $port --save "" \
		--appendonly no --protected-mode no --dir /tmp \
		--logfile /tmp/app.redis &
	server=$!
	# redis-benchmark started before the server listens hangs (seen
	# here: 120 s until killed): start it once a PING, made the same way
	# (over RDMA without fallback, or TCP), is answered.
	# shellcheck disable=SC2086
	app_client /tmp/app.ping $wrap redis-cli -h $ADDR -p $port PING
	# shellcheck disable=SC2086
	app_client /tmp/app.bench $wrap redis-benchmark -h $ADDR -p $port \
		-q -n 5000 -c 4 -t set,get
	# redis-benchmark -q rewrites its line with \r as it goes.
	tr '\r' '\n' < /tmp/app.bench | awk -v af="$af" -v r="$run" '
		/requests per second, p50=/ {
			t = tolower($1); sub(":", "", t); p = $6
			sub("p50=", "", p)
			print "A redis_" t "_rps", af, r, $2
			print "A redis_" t "_p50_ms", af, r, p }'
	timeout 60 redis-cli -h $ADDR -p $port SHUTDOWN NOSAVE > /dev/null 2>&1 ||
		kill $server
	wait $server
}

# The stream columns: ours, rsockets', TCP's (reversed in even runs).
# The default sequence: AF_RSTREAM, its MSG_ZEROCOPY sends (rstream(1)
# --zerocopy; rsockets has none), rsockets, TCP; reversed in even runs.
zc_column() {
	wants zc || return 0
	stream_run rstream_zc $OURS 7490 --zerocopy
}

stream_columns() {
	wants stream || wants zc || return 0
	wrap=
	if [ $((run % 2)) -eq 1 ]; then
		wants stream && stream_run rstream $OURS 7481
		zc_column
		wants stream && stream_run rsockets /usr/bin/rstream 7482
		wants stream && stream_run tcp $OURS 7483 -T s
	else
		wants stream && stream_run tcp $OURS 7483 -T s
		wants stream && stream_run rsockets /usr/bin/rstream 7482
		zc_column
		wants stream && stream_run rstream $OURS 7481
	fi
	return 0
}

# Blocking calls (-T b), both tools as they come (rsockets polls for its
# default polling_time, 10 us, before it sleeps; AF_RSTREAM not at all),
# then both busy-polling for BUSY_US (SO_BUSY_POLL; rsockets' polling_time
# file); reversed in even runs.
blocking_columns() {
	wants block || return 0
	wrap=
	if [ $((run % 2)) -eq 1 ]; then
		stream_run rstream_blk $OURS 7486 -T b
		stream_run rsockets_blk /usr/bin/rstream 7487 -T b
	else
		stream_run rsockets_blk /usr/bin/rstream 7487 -T b
		stream_run rstream_blk $OURS 7486 -T b
	fi
}

busy_columns() {
	wants busy || return 0
	wrap=
	mkdir -p "${RSOCKET_POLLING%/*}"
	echo $BUSY_US > $RSOCKET_POLLING
	if [ $((run % 2)) -eq 1 ]; then
		stream_run rstream_busy $OURS 7488 -T b --busy-poll $BUSY_US
		stream_run rsockets_busy /usr/bin/rstream 7489 -T b
	else
		stream_run rsockets_busy /usr/bin/rstream 7489 -T b
		stream_run rstream_busy $OURS 7488 -T b --busy-poll $BUSY_US
	fi
	rm -f $RSOCKET_POLLING
}

# The transparent columns: over RDMA, kept on TCP (reversed in even runs).
transparent_columns() {
	wants transparent || return 0
	if [ $((run % 2)) -eq 1 ]; then
		wrap="$RUNNER -n"
		stream_run trdma $OURS 7484 -T s
		wrap="$RUNNER -c none -l none"
		stream_run ttcp $OURS 7485 -T s
	else
		wrap="$RUNNER -c none -l none"
		stream_run ttcp $OURS 7485 -T s
		wrap="$RUNNER -n"
		stream_run trdma $OURS 7484 -T s
	fi
	wrap=
}

CLOCK=/sys/devices/system/clocksource/clocksource0/current_clocksource
echo "# kernel $(uname -r), $(nproc) CPUs, rstream $(modinfo -F version rstream)"
# The guest's clock: timings mean little if it changed during the run.
echo "# clocksource at the start: $(cat $CLOCK)"
echo "# rings per socket: $(cat /sys/module/rstream/parameters/mem_default) + $(cat /sys/module/rstream/parameters/wmem_default) bytes"

run=1
while [ $run -le "$RUNS" ]; do
	echo "# run $run of $RUNS"
	# Later places in a run measured faster here (6.1, five runs: the
	# fifth column 20-35 % above the third at every size): even runs go
	# in the reverse order, so the medians carry no place.
	if [ $((run % 2)) -eq 1 ]; then
		stream_columns
		blocking_columns
		busy_columns
		transparent_columns
	else
		transparent_columns
		busy_columns
		blocking_columns
		stream_columns
	fi
	if wants raw; then
		raw_lat 64
		raw_lat 4096
		raw_lat 64 ib_send_lat S
		raw_lat 4096 ib_send_lat S
		kraw_lat 64 20000
		kraw_lat 4096 5000
		kraw_lat 64 20000 1
		kraw_lat 4096 5000 1
		kraw_calls 64 20000
		kraw_calls 4096 5000
		raw_bw 64 5000
		raw_bw 4096 5000
		raw_bw 65536 2000
		raw_bw 1048576 200
	fi
	if wants conn; then
		conn_run rstream
		conn_run rsockets
		conn_run tcp
	fi
	if wants apps; then
		apps_run rstream
		apps_run tcp
		apps_run ttcp
	fi
	run=$((run + 1))
done
echo "# clocksource at the end: $(cat $CLOCK)"
echo "# done"
