# SPDX-License-Identifier: GPL-2.0
"""Counting KTAP and TAP output: what passed and what did not.

One suite's output may hold several documents (KUnit prints one per suite)
and nested subtests (KUnit cases, parameterised cases).  Only leaves count:
a result line is a leaf unless deeper result lines came just before it.
A SKIP counts as not passed: every case in a plan is meant to run.
"""

import re
from dataclasses import dataclass, field

RESULT = re.compile(r"^(\s*)(ok|not ok) (\d+)(?: -)? ?([^#]*?)\s*"
                    r"(?:#\s*(\S+)\s*(.*))?$")
PLAN = re.compile(r"^(\s*)1\.\.(\d+)")
VERSION = re.compile(r"^(\s*)K?TAP version \d+")
BAIL = re.compile(r"^\s*Bail out!")


@dataclass
class Counts:
    passed: int = 0
    failed: int = 0
    failures: list = field(default_factory=list)   # names, with why

    def add(self, other):
        self.passed += other.passed
        self.failed += other.failed
        self.failures += other.failures

    def fail(self, name):
        self.failed += 1
        self.failures.append(name)


def depth(indent):
    return len(indent.expandtabs(4)) // 4


# Lines around results that say nothing about why a case failed: the
# harness's "#  RUN name", "#  OK  name" and "#  FAIL  name".  Not a test
# program's own "FAIL: why", which is the reason itself.
NOISE = re.compile(r"^\s*(?:#\s+(?:RUN|OK|FAIL)\b(?!:)|# Subtest:|# Totals:|"
                   r"# Starting \d+ tests|K?TAP version|1\.\.\d+)")


def parse(text, prefix=""):
    counts = Counts()
    children = {}          # depth -> deeper results seen since last result
    names = {}             # depth -> name of the enclosing subtest
    top_plan = None
    top_results = 0
    detail = []            # what was printed since the last result
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if VERSION.match(line) and depth(VERSION.match(line).group(1)) == 0:
            if top_plan is not None and top_results != top_plan:
                counts.fail(f"{prefix}plan: {top_plan} planned, "
                            f"{top_results} reported")
            top_plan, top_results = None, 0
            children.clear()
            continue
        m = PLAN.match(line)
        if m and depth(m.group(1)) == 0 and top_plan is None:
            top_plan = int(m.group(2))
            continue
        if BAIL.match(line):
            counts.fail(f"{prefix}bailed out: {line.strip()}")
            continue
        m = RESULT.match(line)
        if not m:
            sub = re.match(r"^(\s*)# Subtest: (.*)", line)
            if sub:
                names[depth(sub.group(1))] = sub.group(2).strip()
            elif line.strip() and not NOISE.match(line):
                said = line.strip().lstrip("# ")
                if not detail or detail[-1] != said:
                    detail.append(said)
            continue
        why, detail = detail, []
        d = depth(m.group(1))
        ok = m.group(2) == "ok"
        name = m.group(4).strip() or f"test {m.group(3)}"
        directive = (m.group(5) or "").upper()
        if d == 0:
            top_results += 1
        is_parent = children.get(d, False)
        for k in list(children):
            if k >= d:
                del children[k]
        for k in range(d):
            children[k] = True
        # A subtest's header is at its cases' depth; its result closes it.
        parents = [names[k] for k in sorted(names) if k <= d]
        for k in list(names):
            if k > d:
                del names[k]
        if is_parent:       # its leaves have been counted
            continue
        full = prefix + ".".join(parents + [name])
        if directive == "SKIP":
            counts.fail(f"{full} (skipped: {m.group(6).strip()})")
        elif ok:
            counts.passed += 1
        elif why:
            counts.fail(f"{full}: {' | '.join(why[:3])[:400]}")
        else:
            counts.fail(full)
    if top_plan is not None and top_results != top_plan:
        counts.fail(f"{prefix}plan: {top_plan} planned, {top_results} "
                    "reported")
    if top_plan is None and counts.passed + counts.failed == 0:
        counts.fail(f"{prefix}no KTAP results")
    return counts


# The reader's own cases (a host check): (what, output, words the failure
# it reports must contain).
SELF_CHECKS = [
    ("a shell case whose program printed its reason",
     "TAP version 13\n1..1\n#  RUN xfer\n# slab before: 1 kB\n"
     "# FAIL: connection 7: recv: Connection reset by peer\n"
     "# rstream_xfer failed\nnot ok 1 xfer\n",
     "connection 7: recv: Connection reset by peer"),
    ("a harness case, its FAIL line left out",
     "TAP version 13\n1..1\n#  RUN s.c ...\n# s.c:10:Expected 1 (1) == 2\n"
     "#          FAIL  s.c\nnot ok 1 s.c\n",
     "s.c: s.c:10:Expected 1 (1) == 2"),
]


def self_check():
    """The cases of SELF_CHECKS the reader gets wrong, as text."""
    wrong = []
    for what, text, want in SELF_CHECKS:
        got = parse(text).failures
        if len(got) != 1 or want not in got[0] or "FAIL  " in got[0]:
            wrong.append(f"{what}: reported {got}")
    return wrong
