# SPDX-License-Identifier: GPL-2.0
"""Guest root filesystems.

A guest boots from two concatenated cpio archives:

  base     busybox, rdma-core's tools with their libraries and verbs
           providers, and the kernel modules the tests need (with their
           dependencies): cached per kernel, keyed by the kernel, the host
           packages it copies from and this file.
  overlay  /init, the run's configuration and plan, rstream.ko and the test
           programs: made for every run, small.

The guest tree is merged-/usr like Debian 12: bin, sbin, lib and lib64 are
links into usr.
"""

import lzma
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from .util import CACHE, RigError, digest, dpkg_version, output, run, say

# Host programs copied into every guest, with the libraries they link.
HOST_PROGRAMS = [
    "/usr/bin/bash",
    "/usr/bin/kmod",
    "/usr/bin/rdma",
    "/usr/sbin/ip",
    "/usr/sbin/tc",
    "/usr/bin/ibv_devices",
    "/usr/bin/ibv_devinfo",
    "/usr/bin/rstream",
    "/usr/bin/rping",
    "/usr/bin/ib_write_bw",
    "/usr/bin/ib_write_lat",
    "/usr/bin/ib_send_lat",
    "/usr/bin/nc.traditional",     # an ordinary program, for the preload
    # Real programs run over AF_RSTREAM by rstream-run (rstream_run.sh):
    # a bandwidth tool, a key-value server and its clients, an HTTP server
    # with forked epoll workers and an HTTP client (busybox's wget is
    # static: the preload library cannot reach it), a libevent server.
    "/usr/bin/iperf3",
    "/usr/bin/redis-server",
    "/usr/bin/redis-cli",
    "/usr/bin/redis-benchmark",
    "/usr/sbin/nginx",
    "/usr/bin/curl",
    # a libevent server and libmemcached's clients
    "/usr/bin/memcached",
    "/usr/bin/memccp",
    "/usr/bin/memccat",
    "/usr/bin/memcslap",
    "/usr/bin/chrt",               # scheduling policies (busybox has none)
]
KMOD_LINKS = ["modprobe", "insmod", "rmmod", "lsmod", "depmod", "modinfo"]
# dlopen()ed, so ldd does not list them.
HOST_LIBRARIES = [
    "/usr/lib/x86_64-linux-gnu/libgcc_s.so.1",     # glibc's unwinder
    "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so",
    "/usr/lib/x86_64-linux-gnu/libibverbs/libsiw-rdmav34.so",
    "/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so",
]
HOST_FILES = [
    "/etc/libibverbs.d/rxe.driver",
    "/etc/libibverbs.d/siw.driver",
]
# The packages those come from: a new version makes a new base image.
HOST_PACKAGES = ["busybox-static", "bash", "kmod", "iproute2", "libc6",
                 "rdma-core", "ibverbs-providers", "ibverbs-utils",
                 "libibverbs1", "librdmacm1", "rdmacm-utils", "perftest",
                 "netcat-traditional", "util-linux", "iperf3",
                 "redis-server", "redis-tools", "nginx-light", "curl"]

# Kernel modules the guest may load, with whatever they depend on.  Ones a
# kernel does not have (siw on Debian's) are left out.  crc32_generic is
# loaded by name through request_module() when rxe starts.
GUEST_MODULES = ["rdma_rxe", "siw", "rdma_ucm", "ib_uverbs", "rdma_cm",
                 "dummy", "virtio_net", "virtio_pci", "e1000", "crc32_generic",
                 "configfs", "sch_netem"]


def copy_into(root, host_path):
    """Copy a host file to the same path under root, following links."""
    dest = Path(str(root) + str(host_path))
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not dest.exists():
        shutil.copy2(os.path.realpath(host_path), dest)


def copy_with_libraries(root, path):
    copy_into(root, path)
    res = subprocess.run(["ldd", path], text=True, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    for lib in re.findall(r"(/\S+) \(0x", res.stdout):
        copy_into(root, lib)


def module_closure(kernel):
    """Module files (host paths) for GUEST_MODULES and their dependencies."""
    files = set()
    for name in GUEST_MODULES:
        res = subprocess.run(["modprobe", "-d", kernel.modroot, "-S",
                              kernel.release, "--show-depends", name],
                             text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        if res.returncode != 0:
            if "not found" in res.stderr:
                continue
            raise RigError(f"modprobe --show-depends {name}: {res.stderr}")
        files.update(re.findall(r"^insmod (\S+)", res.stdout, re.M))
    return sorted(files)


def install_modules(root, kernel):
    src = kernel.modroot / "lib" / "modules" / kernel.release
    dest = root / "lib" / "modules" / kernel.release
    dest.mkdir(parents=True)
    for path in module_closure(kernel):
        rel = Path(path).relative_to(src)
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if rel.suffix == ".xz":     # decompress once here, not at every boot
            out.with_suffix("").write_bytes(lzma.open(path).read())
        else:
            shutil.copy2(path, out)
    for f in src.glob("modules.builtin*"):
        shutil.copy2(f, dest / f.name)
    shutil.copy2(src / "modules.order", dest / "modules.order")
    run(["depmod", "-b", root, kernel.release])


def make_root_skeleton(root):
    for d in ["usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "etc", "proc",
              "sys", "dev", "tmp", "run", "root", "var/tmp", "mnt"]:
        (root / d).mkdir(parents=True, exist_ok=True)
    for d in ["bin", "sbin", "lib", "lib64"]:
        os.symlink(f"usr/{d}", root / d)
    # Programs that look users up by name (nginx's "user root") find them.
    (root / "etc/passwd").write_text(
        "root:x:0:0:root:/root:/bin/sh\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")
    (root / "etc/group").write_text("root:x:0:\nnogroup:x:65534:\n")


def install_busybox(root, keep):
    """busybox for everything the copied programs do not provide.

    /bin/sh is bash: Debian's static busybox shell runs its own applets
    before searching $PATH, so scripts under it would get busybox's ip and
    modprobe instead of iproute2's and kmod's."""
    shutil.copy2("/bin/busybox", root / "usr/bin/busybox")
    applets = output(["/bin/busybox", "--list"]).split()
    for applet in applets:
        if applet in keep or applet in ("busybox", "sh"):
            continue
        link = root / "usr/bin" / applet
        if not link.exists():
            os.symlink("busybox", link)
    os.symlink("bash", root / "usr/bin/sh")


def write_cpio(root, dest):
    """A gzip'd newc cpio of root, written atomically."""
    files = subprocess.run(["find", ".", "-mindepth", "1"], cwd=root,
                           check=True, text=True,
                           stdout=subprocess.PIPE).stdout
    tmp = Path(str(dest) + ".tmp")
    with open(tmp, "wb") as f:
        cpio = subprocess.Popen(["cpio", "-o", "-H", "newc", "-R", "0:0",
                                 "--quiet"], cwd=root, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE)
        gz = subprocess.Popen(["gzip", "-1"], stdin=cpio.stdout, stdout=f)
        cpio.stdout.close()
        cpio.communicate(files.encode())
        gz.wait()
        if cpio.returncode or gz.returncode:
            raise RigError(f"cpio of {root} failed")
    tmp.rename(dest)


def base_image(kernel):
    versions = " ".join(f"{p}={dpkg_version(p)}" for p in HOST_PACKAGES)
    # The lists as this process has them, not only this file as it is
    # now: an image made while the file was edited is keyed by what it
    # holds, and the next run makes its own.
    key = digest(kernel.release, kernel.package, versions,
                 Path(__file__), " ".join(GUEST_MODULES),
                 " ".join(HOST_PROGRAMS + HOST_LIBRARIES + HOST_FILES))
    dest = CACHE / "initramfs" / f"base-{kernel.release}-{key}.cpio.gz"
    if dest.exists():
        return dest
    say(f"making the base initramfs for {kernel.release}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rstream-base-") as tmp:
        root = Path(tmp)
        make_root_skeleton(root)
        for prog in HOST_PROGRAMS:
            copy_with_libraries(root, prog)
        for lib in HOST_LIBRARIES:
            copy_with_libraries(root, lib)
        for f in HOST_FILES:
            copy_into(root, f)
        for name in KMOD_LINKS:
            os.symlink("../bin/kmod", root / "usr/sbin" / name)
        names = {Path(p).name for p in HOST_PROGRAMS} | set(KMOD_LINKS)
        install_busybox(root, keep=names)
        install_modules(root, kernel)
        write_cpio(root, dest)
    return dest


def merged_usr(guest_path):
    """The path under /usr for /bin, /sbin, /lib and /lib64: an archive
    entry for a directory there would replace the base's link."""
    parts = guest_path.lstrip("/").split("/")
    if parts[0] in ("bin", "sbin", "lib", "lib64"):
        parts.insert(0, "usr")
    return "/".join(parts)


def overlay_image(dest, files):
    """An archive of {guest path: host Path (file or directory) or text}."""
    with tempfile.TemporaryDirectory(prefix="rstream-overlay-") as tmp:
        root = Path(tmp)
        for guest_path, src in files.items():
            out = root / merged_usr(guest_path)
            out.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(src, str):
                out.write_text(src)
            elif src.is_dir():
                shutil.copytree(src, out, symlinks=True, dirs_exist_ok=True)
            else:
                shutil.copy2(src, out)
        write_cpio(root, dest)


def programs_image(programs, packages):
    """Host programs with their libraries, for the guests of one kind of
    run only (make bench's perf): cached, keyed by the packages."""
    versions = " ".join(f"{p}={dpkg_version(p)}" for p in packages)
    key = digest(" ".join(programs), versions, Path(__file__))
    dest = CACHE / "initramfs" / f"programs-{key}.cpio.gz"
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rstream-programs-") as tmp:
        root = Path(tmp)
        # The same links as the base's, so that /lib/... lands in usr/lib.
        make_root_skeleton(root)
        for prog in programs:
            copy_with_libraries(root, prog)
        write_cpio(root, dest)
    return dest


def initrd(kernel, overlay_files, dest, extra=None):
    """Base, the extra programs (if any) and overlay concatenated: the
    kernel unpacks them in turn."""
    base = base_image(kernel)
    overlay = Path(str(dest) + ".overlay")
    overlay_image(overlay, overlay_files)
    parts = [base] + ([programs_image(*extra)] if extra else []) + [overlay]
    with open(dest, "wb") as out:
        for part in parts:
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out)
    overlay.unlink()
    return dest
