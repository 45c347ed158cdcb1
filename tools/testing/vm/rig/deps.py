# SPDX-License-Identifier: GPL-2.0
"""The Debian packages the rig needs, installed with apt-get."""

from . import kernels
from .util import RigError, apt_install, is_root, run, say

PACKAGES = [
    # building the module, its tests and the debug kernel
    "make", "gcc", "g++", "libc6-dev", "bc", "bison", "flex", "libelf-dev",
    "libssl-dev", "perl", "python3", "sparse", "dkms", "xz-utils", "git",
    # guests
    "qemu-system-x86", "busybox-static", "cpio", "kmod", "iproute2", "bash",
    # rdma-core in the guests, and for interop tests
    "rdma-core", "ibverbs-utils", "ibverbs-providers", "rdmacm-utils",
    "perftest", "libibverbs-dev", "librdmacm-dev",
    # ordinary programs, run under rdma-core's librspreload.so and
    # rstream-run (rstream_run.sh)
    "netcat-traditional", "iperf3", "redis-server", "redis-tools",
    "nginx-light", "curl", "memcached", "libmemcached-tools",
    # make bench's profiles in the guest
    "linux-perf",
]


def install(names):
    if not is_root():
        raise RigError("installing packages needs root")
    say("apt-get update")
    run(["apt-get", "update", "-q"], env={"DEBIAN_FRONTEND": "noninteractive"})
    apt_install(PACKAGES + kernels.header_packages(names))
    return 0
