# SPDX-License-Identifier: GPL-2.0
"""Kernel splats in a guest's console log.

Any of these anywhere in the log fails the run, whatever the tests said:
a lockdep report does not fail a KUnit case, a KASAN report after the first
is silent without kasan_multi_shot, a WARN in module init returns success.
"""

import re

SPLATS = [
    r"BUG: ",                                   # BUG(), KASAN, lockups
    r"WARNING: ",                               # WARN*(), lockdep
    r"Oops",
    r"general protection fault",
    r"Kernel panic",
    r"KASAN",
    r"UBSAN",
    r"possible circular locking dependency",
    r"inconsistent lock state",
    r"possible recursive locking",
    r"suspicious RCU usage",
    r"kmemleak: .*new suspected memory leak",
    r"unreferenced object 0x",                  # kmemleak report body
    r"INFO: task .* blocked for more than",     # hung task
    r"rcu: INFO: .*detected stall",
    r"refcount_t: ",
    r"list_(add|del) corruption",
    r"ODEBUG: ",                                # debugobjects
    r"Call Trace:",
]
SPLAT = re.compile("|".join(f"(?:{s})" for s in SPLATS))

# An allocation that fails reports itself (warn_alloc: a header, then the
# stack).  While a suite injects allocation failures on purpose, between
# the two markers it writes to the log (tools/testing/selftests/net/
# rstream/lib.sh, injecting_failures), that report is the failure asked
# for, not a bug: its stack is not a splat.  Anywhere else it counts, and
# inside the window every other kind of report still does.
INJECT_BEGIN = "rstream-vm: allocation failures injected: begin"
INJECT_END = "rstream-vm: allocation failures injected: end"
ALLOC_REPORT = re.compile(r": (?:page allocation failure|vmalloc error): ")
# The lines warn_alloc's dump_stack prints before "Call Trace:" (CPU,
# Tainted, Hardware name, Workqueue), with room for an interleaved line.
ALLOC_REPORT_LINES = 6


def splats(log_text):
    """(line number, line) of each line that reports a splat."""
    found = []
    injecting = False
    report_at = None
    for n, line in enumerate(log_text.splitlines(), 1):
        if INJECT_BEGIN in line:
            injecting = True
        elif INJECT_END in line:
            injecting = False
        if injecting and ALLOC_REPORT.search(line):
            report_at = n
            continue
        if not SPLAT.search(line):
            continue
        if (report_at is not None and "Call Trace:" in line and
                n - report_at <= ALLOC_REPORT_LINES):
            report_at = None
            continue
        found.append((n, line.rstrip()))
    return found


# The judge's own cases (a host check): (what, log, splat lines expected).
_REPORT = ("kworker/0:1: vmalloc error: size 8192, failed to allocate "
           "pages, mode:0xdc2(GFP_KERNEL|__GFP_HIGHMEM|__GFP_ZERO)\n"
           "CPU: 0 UID: 0 PID: 9 Comm: kworker/0:1 Tainted: G O N\n"
           "Hardware name: QEMU Standard PC\n"
           "Call Trace:\n <TASK>\n dump_stack_lvl+0x62/0x90\n")
_KASAN = "BUG: KASAN: slab-use-after-free in f+0x1/0x2\nCall Trace:\n"
SELF_CHECKS = [
    ("an allocation failure report while failures are injected",
     INJECT_BEGIN + "\n" + _REPORT + INJECT_END + "\n", 0),
    ("an allocation failure report with none injected", _REPORT, 1),
    ("an allocation failure report after the injection ended",
     INJECT_BEGIN + "\n" + INJECT_END + "\n" + _REPORT, 1),
    ("KASAN while failures are injected",
     INJECT_BEGIN + "\n" + _KASAN + INJECT_END + "\n", 2),
    ("a stack far from any allocation failure report",
     INJECT_BEGIN + "\n" + _REPORT + "x\n" * 8 + "Call Trace:\n", 1),
]


def self_check():
    """The cases of SELF_CHECKS the judge gets wrong, as text."""
    return [f"{what}: {len(splats(log))} splat line(s), expected {want}"
            for what, log, want in SELF_CHECKS if len(splats(log)) != want]
