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

# Kernel log lines printed since the last mark_log.
mark_log() {
	LOG_MARK=$(dmesg | wc -l)
}

new_log() {
	dmesg | tail -n +$((LOG_MARK + 1))
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

# run_tests <function>...: the plan, then each function as one case.
# RSTREAM_CASES (from make check, for a quicker run while working) keeps
# only the cases whose names contain one of its words.
run_tests() {
	if [ -n "${RSTREAM_CASES:-}" ]; then
		kept=
		for t in "$@"; do
			for w in $RSTREAM_CASES; do
				case $t in *"$w"*) kept="$kept $t"; break ;; esac
			done
		done
		# shellcheck disable=SC2086 # the case names are words
		set -- $kept
	fi
	ktap_print_header
	ktap_set_plan $#
	for t in "$@"; do
		echo "#  RUN $t"	# as kselftest_harness.h: names a hang
		if out=$("$t" 2>&1); then
			[ -n "$out" ] && echo "$out" | sed 's/^/# /'
			ktap_test_pass "$t"
		else
			echo "$out" | sed 's/^/# /'
			ktap_test_fail "$t"
		fi
	done
	ktap_finished
}
