#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# rstream's module parameters: rsocket's defaults, descriptions in modinfo,
# and range checks that reject bad values with a log line, both at load time
# (the load fails) and through sysfs (the write fails, the value stays).
# Reloads the module; leaves it loaded with its defaults.

. "$(dirname "$0")/lib.sh"

trap 'rmmod rstream rstream_test_family 2>/dev/null; modprobe rstream' EXIT

# name default min max, for every parameter
PARAM_TABLE="family 22 4 25
mem_default 131072 4096 268435456
wmem_default 131072 4096 268435456
sqsize_default 64 16 65534
rqsize_default 128 16 65534
inline_default 64 16 65534
mem_limit 0 0 4294967294
polling_time 0 0 1000000"

param_field() {	# param_field <name> <column 2..4>
	echo "$PARAM_TABLE" | awk -v p="$1" -v c="$2" '$1 == p { print $c }'
}

expect_value() {	# expect_value <param> <value>
	got=$(cat "$PARAMS/$1") || die "cannot read $PARAMS/$1"
	[ "$got" = "$2" ] || die "$1 is $got, expected $2"
}

expect_defaults() {
	echo "$PARAM_TABLE" | while read -r p dflt min max; do
		expect_value "$p" "$dflt" || exit 1
	done
}

defaults_are_rsockets() {
	expect_defaults
}

modinfo_describes_every_parameter() {
	info=$(modinfo -p rstream) || die "modinfo -p rstream failed"
	echo "$PARAM_TABLE" | while read -r p dflt min max; do
		echo "$info" | grep -q "^$p:.*default $dflt" ||
			die "modinfo -p: no description of $p with its default"
	done
}

family_is_read_only() {
	if (echo 18 > "$PARAMS/family") 2>/dev/null; then
		die "writing family succeeded"
	fi
	expect_value family 22
}

# sysfs_rejects <param>: out-of-range and malformed values
sysfs_rejects() {
	p=$1
	min=$(param_field "$p" 3)
	max=$(param_field "$p" 4)
	before=$(cat "$PARAMS/$p")
	for v in $((min - 1)) $((max + 1)) abc "" -1 4294967296 " 64"; do
		mark_log
		if (echo "$v" > "$PARAMS/$p") 2>/dev/null; then
			die "$p accepted '$v'"
		fi
		expect_value "$p" "$before"
		new_log | grep -q "rstream: $p: invalid value" ||
			die "no log line rejecting $p='$v'"
	done
}

sysfs_rejects_mem_default() { sysfs_rejects mem_default; }
sysfs_rejects_wmem_default() { sysfs_rejects wmem_default; }
sysfs_rejects_sqsize_default() { sysfs_rejects sqsize_default; }
sysfs_rejects_rqsize_default() { sysfs_rejects rqsize_default; }
sysfs_rejects_inline_default() { sysfs_rejects inline_default; }
sysfs_rejects_mem_limit() { sysfs_rejects mem_limit; }
sysfs_rejects_polling_time() { sysfs_rejects polling_time; }

# sysfs_accepts <param>: both ends of the range, then the default back
sysfs_accepts() {
	p=$1
	for v in "$(param_field "$p" 3)" "$(param_field "$p" 4)" \
		 "$(param_field "$p" 2)"; do
		echo "$v" > "$PARAMS/$p" || die "$p rejected $v"
		expect_value "$p" "$v"
	done
}

sysfs_accepts_mem_default() { sysfs_accepts mem_default; }
sysfs_accepts_wmem_default() { sysfs_accepts wmem_default; }
sysfs_accepts_sqsize_default() { sysfs_accepts sqsize_default; }
sysfs_accepts_rqsize_default() { sysfs_accepts rqsize_default; }
sysfs_accepts_inline_default() { sysfs_accepts inline_default; }
sysfs_accepts_mem_limit() { sysfs_accepts mem_limit; }
sysfs_accepts_polling_time() { sysfs_accepts polling_time; }

# load_rejects <param>=<value>: the load fails and says why
load_rejects() {
	unload_rstream
	mark_log
	if modprobe rstream "$1" 2>/dev/null; then
		die "rstream loaded with $1"
	fi
	[ -d /sys/module/rstream ] && die "rstream present after a failed load"
	new_log | grep -q "rstream: ${1%%=*}: invalid value" ||
		die "no log line rejecting $1"
	modprobe rstream || die "cannot load rstream with its defaults"
}

load_rejects_family_0() { load_rejects family=0; }
load_rejects_family_46() { load_rejects family=46; }
# AF_VSOCK: a real family, even while its module is not loaded
load_rejects_family_of_linux() { load_rejects family=40; }
load_rejects_mem_default() { load_rejects mem_default=4095; }
load_rejects_wmem_default() { load_rejects wmem_default=268435457; }
load_rejects_sqsize_default() { load_rejects sqsize_default=15; }
load_rejects_rqsize_default() { load_rejects rqsize_default=65535; }
load_rejects_inline_default() { load_rejects inline_default=abc; }
load_rejects_mem_limit() { load_rejects mem_limit=4294967295; }
load_rejects_polling_time() { load_rejects polling_time=1000001; }

load_accepts_range_ends() {
	unload_rstream
	modprobe rstream mem_default=4096 wmem_default=268435456 \
		sqsize_default=16 rqsize_default=65534 inline_default=65534 ||
		die "load with in-range values failed"
	expect_value mem_default 4096
	expect_value wmem_default 268435456
	expect_value sqsize_default 16
	expect_value rqsize_default 65534
	expect_value inline_default 65534
	unload_rstream
	modprobe rstream || die "cannot load rstream"
	expect_defaults
}

load_fails_on_family_in_use() {
	modprobe rstream_test_family family=18 ||
		die "cannot load the helper that occupies family 18"
	unload_rstream
	mark_log
	if modprobe rstream family=18 2>/dev/null; then
		rmmod rstream_test_family
		die "rstream loaded as family 18, which was in use"
	fi
	rmmod rstream_test_family
	[ -d /sys/module/rstream ] && die "rstream present after a failed load"
	new_log | grep -q "rstream: address family 18 is already registered" ||
		die "no log line naming the family in use"
	modprobe rstream || die "cannot load rstream with its defaults"
}

load_with_other_family() {
	unload_rstream
	mark_log
	modprobe rstream family=18 || die "cannot load rstream as family 18"
	expect_value family 18
	new_log | grep -q "registered as address family 18" ||
		die "no log line naming family 18"
	[ "$("$DIR/rstream_sock" 18)" = ok ] || die "socket(18) failed"
	[ "$("$DIR/rstream_sock" 22)" = EAFNOSUPPORT ] ||
		die "socket(22) did not fail with EAFNOSUPPORT"
	unload_rstream
	modprobe rstream || die "cannot load rstream"
	[ "$("$DIR/rstream_sock" 22)" = ok ] || die "socket(22) failed"
	[ "$("$DIR/rstream_sock" 18)" = EAFNOSUPPORT ] ||
		die "socket(18) did not fail with EAFNOSUPPORT"
}

run_tests defaults_are_rsockets modinfo_describes_every_parameter \
	family_is_read_only \
	sysfs_rejects_mem_default sysfs_rejects_wmem_default \
	sysfs_rejects_sqsize_default sysfs_rejects_rqsize_default \
	sysfs_rejects_inline_default sysfs_rejects_mem_limit \
	sysfs_rejects_polling_time \
	sysfs_accepts_mem_default sysfs_accepts_wmem_default \
	sysfs_accepts_sqsize_default sysfs_accepts_rqsize_default \
	sysfs_accepts_inline_default sysfs_accepts_mem_limit \
	sysfs_accepts_polling_time \
	load_rejects_family_0 load_rejects_family_46 \
	load_rejects_family_of_linux load_rejects_mem_default \
	load_rejects_wmem_default load_rejects_sqsize_default \
	load_rejects_rqsize_default load_rejects_inline_default \
	load_rejects_mem_limit load_rejects_polling_time \
	load_accepts_range_ends load_fails_on_family_in_use \
	load_with_other_family
