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

# injecting_failures begin|end: from begin to end, allocations fail on
# purpose, and the kernel's report of each (warn_alloc's "vmalloc error"
# with its stack) is what was asked for: the rig's console judge does not
# count those (tools/testing/vm/rig/console.py).  Any other report still
# fails the run.
injecting_failures() {
	echo "rstream-vm: allocation failures injected: $1" > /dev/kmsg
}

# run_tests <function>...: the plan, then each function as one case.
run_tests() {
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
