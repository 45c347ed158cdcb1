# SPDX-License-Identifier: GPL-2.0
#
# Shared by the shell selftests: one function per test case, KTAP output
# through kselftest's ktap_helpers.sh.  A case fails by printing why and
# returning non-zero (die does both).

DIR=$(cd "$(dirname "$0")" && pwd)
PARAMS=/sys/module/rstream/parameters
. "$DIR/ktap_helpers.sh"

die() {
	echo "$*"
	exit 1
}

# Kernel log lines printed since the last mark_log.  The mark is a line
# of its own in the log, not a count of lines: once the log's ring is full
# (128 KiB on Debian's kernels), each new line pushes an old one out and
# the count stops growing.  A CI run at 4e009e2 on the debug kernel, whose
# log had filled by then, got nothing back from new_log and failed
# rstream_bench.sh.  The mark is written at debug level, so it stays off
# the console.
mark_log() {
	LOG_MARK="rstream-selftest: log mark $(cat /proc/sys/kernel/random/uuid)"
	echo "<7>$LOG_MARK" > /dev/kmsg
}

new_log() {
	if [ -z "${LOG_MARK:-}" ]; then
		dmesg
		return
	fi
	dmesg | awk -v m="$LOG_MARK" 'on { print } index($0, m) { on = 1 }
		END { exit !on }' ||
		echo "new_log: the mark has left the kernel log" >&2
}

# fill_kernel_log: log lines (at debug level, off the console) until the
# oldest line in the log is pushed out, as a long run does.
fill_kernel_log() {
	_first=$(dmesg | head -n 1)
	_pad=$(printf '%0800d' 0)
	_i=0
	while [ "$(dmesg | head -n 1)" = "$_first" ]; do
		[ $_i -ge 2000 ] && die "the kernel log kept its first line after 2000 lines of 800 bytes"
		for _j in 1 2 3 4 5 6 7 8; do
			_i=$((_i + 1))
			echo "<7>rstream-selftest: filler $_i $_pad" > /dev/kmsg
		done
	done
}

# AF_RSTREAM sockets in use (the "sockets" column of /proc/net/protocols).
rstream_sockets() {
	awk '$1 == "RSTREAM" { print $3 }' /proc/net/protocols
}

# wait_no_sockets <seconds>: closed sockets finish their teardown in the
# background; 0 once none is left, 1 if some remain after <seconds>.
wait_no_sockets() {
	_waited=0	# not i: callers loop with it
	until [ "$(rstream_sockets)" = 0 ]; do
		_waited=$((_waited + 1))
		[ $_waited -gt $(($1 * 10)) ] && return 1
		sleep 0.1
	done
	return 0
}

# unload_rstream: rmmod once the sockets earlier cases or suites closed
# have finished their teardown (each holds the module until freed; a CI
# run at 395c9e2 on stock 6.12 ran rstream_params right after
# rstream_hostile and got "in use").  Dies saying what still holds it.
unload_rstream() {
	wait_no_sockets $((30 * ${RSTREAM_TIME_SCALE:-1})) ||
		die "$(rstream_sockets) sockets remain 30 s after they were closed"
	rmmod rstream ||
		die "cannot unload rstream (refcnt $(cat /sys/module/rstream/refcnt))"
}

# injecting_failures begin|end: from begin to end, allocations fail on
# purpose, and the kernel's report of each (warn_alloc's "vmalloc error"
# with its stack) is what was asked for: the rig's console judge does not
# count those (tools/testing/vm/rig/console.py).  Any other report still
# fails the run.
injecting_failures() {
	echo "rstream-vm: allocation failures injected: $1" > /dev/kmsg
}

# The processes a case started carry its tag (RSTREAM_CASE) in their
# environment.  A case that dies before it stops its servers, or fails
# without stopping them, leaves them holding sockets: a CI run at 2325b0b
# lost a case of rstream_mem.sh that way, and its 21 sockets failed every
# later case that waits for none to remain, and hung the suite after.
case_processes() {
	grep -l "RSTREAM_CASE=$1" /proc/[0-9]*/environ 2>/dev/null |
		sed 's|^/proc/\([0-9]*\)/environ$|\1|'
}

# stop_leftovers <tag>: end what the case left running (TERM, then KILL
# after 5 s); prints their names, nothing if there were none.
stop_leftovers() {
	_pids=$(case_processes "$1")
	[ -z "$_pids" ] && return 0
	for _p in $_pids; do cat "/proc/$_p/comm" 2>/dev/null; done |
		sort | uniq -c |
		awk '{ printf "%s%s (%d)", sep, $2, $1; sep = ", " } END { print "" }'
	# shellcheck disable=SC2086 # pids are words
	kill $_pids 2>/dev/null
	_i=0
	while [ -n "$(case_processes "$1")" ] && [ $_i -lt 50 ]; do
		_i=$((_i + 1))
		sleep 0.1
	done
	_pids=$(case_processes "$1")
	# shellcheck disable=SC2086
	[ -n "$_pids" ] && kill -KILL $_pids 2>/dev/null
	return 0
}

# keep_cases <words> <case>...: the cases whose names contain one of the
# words, space separated.
keep_cases() {
	_words=$1
	shift
	for _t in "$@"; do
		for _w in $_words; do
			case $_t in *"$_w"*) echo "$_t"; break ;; esac
		done
	done
}

# run_tests <function>...: the plan, then each function as one case.
# RSTREAM_CASES (from make check, for a quicker run while working) keeps
# only the cases whose names contain one of its words; so does
# RSTREAM_SUITE_CASES (comma separated), the rig's choice for this suite
# on this kernel.  A case runs if both keep it.
run_tests() {
	if [ -n "${RSTREAM_SUITE_CASES:-}" ]; then
		_suite_words=$(echo "$RSTREAM_SUITE_CASES" | tr , ' ')
		# A word that keeps nothing is a case renamed under the rig's
		# choice: it would drop out of the runs without a word.
		for _w in $_suite_words; do
			[ -n "$(keep_cases "$_w" "$@")" ] ||
				die "RSTREAM_SUITE_CASES: no case of $0 has '$_w' in its name"
		done
		# shellcheck disable=SC2046 # the case names are words
		set -- $(keep_cases "$_suite_words" "$@")
	fi
	if [ -n "${RSTREAM_CASES:-}" ]; then
		# shellcheck disable=SC2046 # the case names are words
		set -- $(keep_cases "$RSTREAM_CASES" "$@")
	fi
	ktap_print_header
	ktap_set_plan $#
	_n=0
	for t in "$@"; do
		_n=$((_n + 1))
		_tag="$$:$_n:"
		echo "#  RUN $t"	# as kselftest_harness.h: names a hang
		if out=$(export RSTREAM_CASE="$_tag"; "$t" 2>&1); then
			_rc=0
		else
			_rc=$?
		fi
		_left=$(stop_leftovers "$_tag")
		[ -n "$out" ] && echo "$out" | sed 's/^/# /'
		[ $_rc -gt 128 ] && echo "# $t ended by signal $((_rc - 128))"
		[ -n "$_left" ] && echo "# left running by $t, now stopped: $_left"
		if [ $_rc = 0 ]; then
			ktap_test_pass "$t"
		else
			[ -z "$out" ] && [ $_rc -le 128 ] &&
				echo "# $t failed (exit $_rc) and said nothing"
			ktap_test_fail "$t"
		fi
	done
	ktap_finished
}
