# SPDX-License-Identifier: GPL-2.0
"""Booting guests under QEMU with TCG (KVM does not work on these machines)
and watching them until they power off.

A guest writes its results to its second serial port; the host reads that
file while the guest runs, knows which suite is running and how long it may
take, and kills the guest (naming the suite and the last test started) when
a limit passes.  The kernel console goes to the first serial port's file.
"""

import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .util import RigError, tail

BOOT_LIMIT = {False: 120, True: 300}     # to @@SETUP-DONE: stock, debug
SUITE_GRACE = 30                         # past a suite's own limit
FINISH_LIMIT = 180                       # after the last suite
POWEROFF_LIMIT = 30                      # after @@GUEST-DONE
RUN_LINE = re.compile(r"^#\s+RUN\s+(\S+)")


@dataclass
class Guest:
    name: str
    kernel: object
    initrd: Path
    logdir: Path
    smp: int = 2
    memory: int = 2048
    net: list = field(default_factory=list)     # extra QEMU arguments
    # filled in while it runs (times are time.monotonic())
    proc: object = None
    started: float = 0.0
    results_text: str = ""
    setup_done: bool = False
    setup_failed: str = ""
    boot_seconds: float = 0.0
    suite: str = ""
    suite_started: float = 0.0
    suite_limit: int = 0
    suite_finished: float = 0.0
    last_test: str = ""
    finished: bool = False
    finished_at: float = 0.0
    killed: str = ""

    @property
    def console(self):
        return self.logdir / f"{self.name}.console.log"

    @property
    def results(self):
        return self.logdir / f"{self.name}.results.log"

    @property
    def qemu_log(self):
        return self.logdir / f"{self.name}.qemu.log"


def cmdline(kernel):
    args = ["console=ttyS0,115200", "panic=-1", "oops=panic",
            "printk.devkmsg=on", "hung_task_panic=0"]
    # TCG's TSC and HPET drift apart under load.  Left to itself, the
    # guest either distrusts the TSC at boot (6.1: every clock read is
    # an emulated HPET access) or its watchdog drops it mid-run (6.12:
    # clock reads change cost during a measurement, and marking the
    # TSC unstable flips a static key whose text patching oopses on
    # the other vCPU, "Oops: int3" in sched_clock_cpu).  QEMU derives
    # every vCPU's TSC from one clock, so it can be trusted as it is.
    args += ["tsc=reliable"]
    if kernel.debug:
        args += ["kasan_multi_shot", "kmemleak=on"]
    return " ".join(args)


def qemu_command(guest, interactive=False):
    cmd = ["qemu-system-x86_64", "-nodefaults", "-no-user-config",
           "-accel", "tcg,thread=multi", "-cpu", "max",
           "-smp", str(guest.smp), "-m", str(guest.memory),
           "-display", "none", "-no-reboot",
           "-kernel", str(guest.kernel.bzimage),
           "-initrd", str(guest.initrd),
           "-append", cmdline(guest.kernel)]
    if interactive:
        cmd += ["-serial", "mon:stdio", "-serial", "null"]
    else:
        cmd += ["-serial", f"file:{guest.console}",
                "-serial", f"file:{guest.results}"]
    return cmd + guest.net


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port):
    """Whether something on this host listens on 127.0.0.1:port (TCP)."""
    want = f"0100007F:{port:04X}"
    try:
        with open("/proc/net/tcp") as f:
            return any(line.split()[1] == want and line.split()[3] == "0A"
                       for line in f.readlines()[1:])
    except OSError:
        return False


def pair_networking(port, model):
    """QEMU arguments joining two guests with a TCP socket netdev, each
    with a NIC of @model."""
    nic = model + ",netdev=wire,mac=52:54:00:72:73:0{}"
    return ([["-netdev", f"socket,id=wire,listen=127.0.0.1:{port}",
              "-device", nic.format(1)],
             ["-netdev", f"socket,id=wire,connect=127.0.0.1:{port}",
              "-device", nic.format(2)]])


def start(guest):
    guest.logdir.mkdir(parents=True, exist_ok=True)
    for f in (guest.console, guest.results):
        f.unlink(missing_ok=True)
    guest.started = time.monotonic()
    with open(guest.qemu_log, "w") as qemu_log:
        guest.proc = subprocess.Popen(qemu_command(guest),
                                      stdin=subprocess.DEVNULL,
                                      stdout=qemu_log,
                                      stderr=subprocess.STDOUT,
                                      start_new_session=True)


def kill(guest, why):
    if guest.proc and guest.proc.poll() is None:
        guest.killed = why
        os.killpg(guest.proc.pid, signal.SIGKILL)
        guest.proc.wait()


def read_results(guest, on_line):
    try:
        text = guest.results.read_text(errors="replace")
    except OSError:
        return
    new = text[len(guest.results_text):]
    # only whole lines
    cut = new.rfind("\n")
    if cut < 0:
        return
    new = new[:cut + 1]
    guest.results_text += new
    for line in new.splitlines():
        line = line.rstrip("\r")
        watch(guest, line)
        on_line(guest, line)


def watch(guest, line):
    now = time.monotonic()
    if line.startswith("@@SETUP-DONE"):
        guest.setup_done = True
        guest.boot_seconds = now - guest.started
    elif line.startswith("@@SETUP-FAILED"):
        guest.setup_failed = line.split(" ", 1)[1] if " " in line else "?"
    elif line.startswith("@@SUITE-BEGIN"):
        m = re.match(r"@@SUITE-BEGIN (\S+) timeout=(\d+)", line)
        guest.suite, guest.suite_limit = m.group(1), int(m.group(2))
        guest.suite_started = now
        guest.last_test = ""
    elif line.startswith("@@SUITE-END"):
        guest.suite = ""
        guest.suite_finished = now
    elif line.startswith("@@GUEST-DONE"):
        guest.finished = True
        guest.finished_at = now
    else:
        m = RUN_LINE.match(line)
        if m:
            guest.last_test = m.group(1)


def deadline(guest):
    """When this guest must have made its next step, and what step."""
    if guest.finished:
        return guest.finished_at + POWEROFF_LIMIT, "power-off"
    if not guest.setup_done:
        return guest.started + BOOT_LIMIT[guest.kernel.debug], "boot and set-up"
    if guest.suite:
        what = f"suite {guest.suite}"
        if guest.last_test:
            what += f" (last test started: {guest.last_test})"
        return guest.suite_started + guest.suite_limit + SUITE_GRACE, what
    since = guest.suite_finished or guest.started + guest.boot_seconds
    return since + FINISH_LIMIT, "unload and leak scan after the suites"


def run(guests, on_line, pair_port=None):
    """Boot the guests (a pair: the listening one first) and watch them
    until all have exited."""
    start(guests[0])
    if pair_port:
        until = time.monotonic() + 30
        while not listening(pair_port):
            if guests[0].proc.poll() is not None or time.monotonic() > until:
                kill(guests[0], "QEMU did not open the wire socket")
                raise RigError(f"{guests[0].name}: QEMU did not listen on "
                               f"port {pair_port}: "
                               f"{tail(guests[0].qemu_log, 5)}")
            time.sleep(0.1)
    for g in guests[1:]:
        start(g)
    while any(g.proc.poll() is None for g in guests):
        time.sleep(0.25)
        for g in guests:
            read_results(g, on_line)
            if g.proc.poll() is not None:
                continue
            when, what = deadline(g)
            if time.monotonic() > when:
                why = f"timed out during {what}"
                for other in guests:
                    kill(other, why if other is g else
                         f"stopped: {g.name} {why}")
    for g in guests:
        read_results(g, on_line)
