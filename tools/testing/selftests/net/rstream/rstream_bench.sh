#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The helpers `make bench` measures its floors with, on every kernel the
# tests run on: rstream_test_rawlat's round trips between two kernel QPs,
# in its init (with the copies a socket makes) and made by two programs'
# system calls on its devices and on its sockets (rstream_rawcalls), and
# the guards on those.  Needs rxe0 (set up by the VM runner) on 192.0.2.1.

. "$(dirname "$0")/lib.sh"

DEV=/dev/rstream_rawlat_

restore() {
	rmmod rstream_test_rawlat 2>/dev/null
}
trap restore EXIT

# load <param>...: the helper with <param>, and its kernel log since.
# Unloaded first: modprobe does nothing for a module already loaded, so a
# case that failed before its rmmod would give the next one the wrong
# parameters.
load() {
	rmmod rstream_test_rawlat 2>/dev/null
	mark_log
	modprobe rstream_test_rawlat "$@" ||
		die "modprobe rstream_test_rawlat $*: $(new_log | tail -n 3)"
}

# The round trips in the module's init, with the copies in and out of
# modprobe's memory: one line with the figure, and unloaded cleanly.  Run
# with the kernel log full, as it is by this point on the debug kernel.
rawlat_in_init_with_copies() {
	fill_kernel_log
	load size=64 iters=200 copy=1
	new_log | grep -q 'rstream_test_rawlat: rawlatcopy 64 200 [0-9]*\.[0-9]*$' ||
		die "no result line: $(new_log | tail -n 3)"
	rmmod rstream_test_rawlat || die "rmmod after the run failed"
}

# Two programs' write() and read() on the devices; rstream_rawcalls
# checks each round trip's byte came back.
rawlat_calls_round_trips() {
	load size=4096 calls=1
	out=$("$DIR/rstream_rawcalls" 4096 200 2>&1) ||
		die "rstream_rawcalls: $out"
	echo "$out" | grep -q '^rawcalls 4096 200 [0-9]*\.[0-9]*$' ||
		die "no result line: $out"
	rmmod rstream_test_rawlat || die "rmmod after the run failed"
}

# The same through sockets of a family of the helper's own: send() and
# recv() check each round trip's byte as above.  A family in use (the
# module's own, rstream's) is refused with the reason logged, and so is a
# family without calls; neither leaves the helper loaded.
rawlat_socket_calls() {
	load size=64 calls=1 family=23
	out=$("$DIR/rstream_rawcalls" 64 200 23 2>&1) ||
		die "rstream_rawcalls over sockets: $out"
	echo "$out" | grep -q '^rawsockcalls 64 200 [0-9]*\.[0-9]*$' ||
		die "no result line: $out"
	rmmod rstream_test_rawlat || die "rmmod after the run failed"

	af=$(cat /sys/module/rstream/parameters/family) ||
		die "no family parameter"
	mark_log
	out=$(modprobe rstream_test_rawlat calls=1 family="$af" 2>&1) &&
		die "family $af (rstream's) was taken"
	echo "$out" | grep -q 'busy' || die "family $af in use: $out"
	new_log | grep -q "rstream_test_rawlat: address family $af: " ||
		die "no reason logged: $(new_log | tail -n 3)"
	out=$(modprobe rstream_test_rawlat family=23 2>&1) &&
		die "a family without calls was taken"
	echo "$out" | grep -q 'Invalid argument' || die "without calls: $out"
	grep -q '^rstream_test_rawlat ' /proc/modules &&
		die "left loaded after a refusal"
	return 0
}

# A load that fails after the devices are made (a family in use, here
# rstream's) lets nobody open one meanwhile: the failed init frees the
# module whatever holds it.  A shell opens the client's device in a loop
# (the builtin's redirection: an open and a close, no fork) across ten
# such loads; each open that worked is counted.  (A regular builtin: a
# special one's failed redirection would end the looping shell.)
rawlat_failed_load_opens_nothing() {
	af=$(cat /sys/module/rstream/parameters/family) ||
		die "no family parameter"
	rmmod rstream_test_rawlat 2>/dev/null
	: > /tmp/rawlat.opened
	(
		while :; do
			if { true < ${DEV}client; } 2>/dev/null; then
				echo opened >> /tmp/rawlat.opened
			fi
		done
	) &
	opener=$!
	i=0 taken=0
	while [ $i -lt 10 ] && [ $taken -eq 0 ]; do
		modprobe rstream_test_rawlat calls=1 family="$af" 2>/dev/null &&
			taken=1
		i=$((i + 1))
	done
	# The loop goes before any verdict: it would spin on after a die.
	kill $opener 2>/dev/null || die "the opening loop ended early"
	wait $opener 2>/dev/null
	[ $taken -eq 0 ] || die "family $af (rstream's) was taken"
	opened=$(wc -l < /tmp/rawlat.opened)
	[ "$opened" -eq 0 ] ||
		die "a device opened $opened times during loads that failed"
	grep -q '^rstream_test_rawlat ' /proc/modules &&
		die "left loaded after a refusal"
	return 0
}

# One open of each device at a time; a call of another size is refused;
# a read that no write answers ends after its bound, or at a signal; an
# open device keeps the module loaded.
rawlat_calls_guarded() {
	load size=64 calls=1
	# The open file, held by a process that only waits (its pid: exec).
	(exec 3< ${DEV}server && exec sleep 30) &
	holder=$!
	sleep 0.5
	out=$(head -c 64 ${DEV}server 2>&1) && die "a second open worked"
	echo "$out" | grep -q 'busy' || die "a second open: $out"
	rmmod rstream_test_rawlat 2>/dev/null && die "rmmod with a device open worked"
	kill $holder
	wait $holder 2>/dev/null

	out=$(dd if=${DEV}client bs=63 count=1 2>&1) && die "a 63-byte read worked"
	echo "$out" | grep -q 'Invalid argument' || die "a 63-byte read: $out"

	start=$(date +%s)
	out=$(dd if=${DEV}client bs=64 count=1 2>&1) &&
		die "a read that no write answers worked"
	echo "$out" | grep -q 'timed out' ||
		die "a read that no write answers: $out"
	[ $(($(date +%s) - start)) -le 8 ] || die "the read took over 8 s"

	dd if=${DEV}client bs=64 count=1 > /tmp/rawlat.dd 2>&1 &
	reader=$!
	sleep 1
	start=$(date +%s)
	kill -TERM $reader
	wait $reader 2>/dev/null
	[ $(($(date +%s) - start)) -le 2 ] ||
		die "a signal did not end the read: $(cat /tmp/rawlat.dd)"
	rmmod rstream_test_rawlat || die "rmmod once closed failed"
}

run_tests rawlat_in_init_with_copies rawlat_calls_round_trips \
	rawlat_socket_calls rawlat_failed_load_opens_nothing \
	rawlat_calls_guarded
