#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# kunit.sh <module>: load a KUnit test module (its suites run while it
# loads), print the KTAP of every suite it added, and unload it.

mod=$1
dir=/sys/kernel/debug/kunit
before=" $(ls $dir 2>/dev/null | tr '\n' ' ') "

if ! modprobe "$mod"; then
	printf 'KTAP version 1\n1..1\nnot ok 1 %s # module failed to load\n' \
		"$mod"
	exit 1
fi
for suite in $(ls $dir); do
	case $before in *" $suite "*) continue ;; esac
	cat "$dir/$suite/results"
done
rmmod "$mod"
