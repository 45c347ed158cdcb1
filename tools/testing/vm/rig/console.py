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


def splats(log_text):
    """(line number, line) of each line that reports a splat."""
    found = []
    for n, line in enumerate(log_text.splitlines(), 1):
        if SPLAT.search(line):
            found.append((n, line.rstrip()))
    return found
