# SPDX-License-Identifier: GPL-2.0
"""The kernels tests run on.

  6.1    Debian's stock 6.1 image (the linux-image-amd64 metapackage)
  6.12   Debian's stock 6.12 image (the linux-image-6.12-amd64 metapackage)
  debug  6.12 built from Debian's linux-source-6.12 with KUnit, KASAN,
         lockdep, kmemleak, fault injection, rxe and siw (debug.config)

Stock images are downloaded with apt-get and unpacked into the cache; the
matching linux-headers package is what modules are built against.  The debug
kernel is built once per linux-source version and configuration.
"""

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .util import (CACHE, JOBS, VM_DIR, RigError, apt_candidate,
                   apt_download, apt_install, digest, output, run, say, stamp,
                   stamp_ok)

STOCK_METAPACKAGES = {
    "6.1": "linux-image-amd64",
    "6.12": "linux-image-6.12-amd64",
}
DEBUG = "debug"
ALL = ["6.1", "6.12", DEBUG]
SOURCE_PACKAGE = "linux-source-6.12"
DEBUG_CONFIG = VM_DIR / "debug.config"


@dataclass
class Kernel:
    name: str               # 6.1, 6.12 or debug
    release: str            # uname -r in the guest
    package: str            # what it was made from, for reports
    bzimage: Path
    modroot: Path           # holds lib/modules/<release>
    kdir: Path              # where external modules are built
    config: dict = field(default_factory=dict, repr=False)

    def enabled(self, symbol):
        return self.config.get(symbol) in ("y", "m")

    @property
    def debug(self):
        return self.name == DEBUG


def read_config(path):
    config = {}
    for line in Path(path).read_text().splitlines():
        m = re.match(r"(CONFIG_\w+)=(.*)", line)
        if m:
            config[m.group(1)] = m.group(2).strip('"')
    return config


def stock_release(name):
    """The kernel release the metapackage currently points at."""
    meta = STOCK_METAPACKAGES[name]
    deps = output(["apt-cache", "depends", "--important", meta])
    for line in deps.splitlines():
        m = re.match(r"\s*Depends: linux-image-(\S+)$", line)
        if m:
            return m.group(1)
    raise RigError(f"cannot tell which kernel {meta} depends on; "
                   "run 'apt-get update' (make deps does)")


def unpack(deb, dest):
    """A .deb's files under dest, replacing whatever was there."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    say(f"unpacking {deb.name}")
    run(["dpkg-deb", "-x", deb, dest])


def headers_dir(release):
    return Path("/usr/src") / f"linux-headers-{release}"


def stock_kernel(name):
    release = stock_release(name)
    image = f"linux-image-{release}-unsigned"
    version = apt_candidate(image)
    if not headers_dir(release).exists():
        apt_install([f"linux-headers-{release}"])
    root = CACHE / "kernels" / f"{name}-{release}-{version}"
    if not stamp_ok(root):
        unpack(apt_download(image, version), root)
        run(["depmod", "-b", root, release])
        stamp(root)
    return Kernel(name=name, release=release, package=f"{image} {version}",
                  bzimage=root / "boot" / f"vmlinuz-{release}",
                  modroot=root, kdir=headers_dir(release),
                  config=read_config(root / "boot" / f"config-{release}"))


def linux_source():
    """Debian's linux-source-6.12, unpacked once: the debug kernel's source,
    and kselftest_harness.h and checkpatch.pl for every kernel."""
    version = apt_candidate(SOURCE_PACKAGE)
    top = CACHE / "src" / f"{SOURCE_PACKAGE}-{version}"
    tree = top / SOURCE_PACKAGE
    if not stamp_ok(top):
        unpack(apt_download(SOURCE_PACKAGE, version), top / "pkg")
        tarball = top / "pkg" / "usr" / "src" / f"{SOURCE_PACKAGE}.tar.xz"
        run(["tar", "-C", top, "-xf", tarball])
        shutil.rmtree(top / "pkg")
        if not (tree / "Makefile").exists():
            raise RigError(f"{tarball} did not unpack to {tree}")
        stamp(top)
    return tree, version


def check_fragment(fragment, config_path):
    """Every symbol the fragment sets must have survived olddefconfig."""
    config = read_config(config_path)
    lost = []
    for line in fragment.read_text().splitlines():
        m = re.match(r"(CONFIG_\w+)=(.*)", line)
        if m:
            want = m.group(2).strip('"')
            if config.get(m.group(1)) != want:
                lost.append(f"{m.group(1)}={want} (got "
                            f"{config.get(m.group(1), 'unset')})")
        m = re.match(r"# (CONFIG_\w+) is not set", line)
        if m and config.get(m.group(1), "n") != "n":
            lost.append(f"{m.group(1)} unset (got {config[m.group(1)]})")
    if lost:
        raise RigError(f"{fragment.name}: Kconfig dropped or changed:\n  " +
                       "\n  ".join(lost))


def debug_kernel():
    """One build tree per linux-source version; a changed configuration (or
    compiler) is rebuilt in place, which only recompiles what it affects."""
    src, version = linux_source()
    gcc = output(["gcc", "--version"]).splitlines()[0]
    key = digest(DEBUG_CONFIG, "tinyconfig+kvm_guest.config", gcc)
    top = CACHE / "kernels" / f"debug-{version}"
    obj, modroot = top / "obj", top / "modroot"
    built = top / ".complete"
    if not (built.exists() and built.read_text().strip() == key):
        top.mkdir(parents=True, exist_ok=True)
        built.unlink(missing_ok=True)
        log = top / "build.log"
        say(f"building the debug kernel in {top} (log: {log}); "
            "a cold build takes 5-10 minutes")
        make = ["make", "-C", src, f"O={obj}", "ARCH=x86_64"]
        run(make + ["-s", "tinyconfig"], log=log)
        run([src / "scripts" / "kconfig" / "merge_config.sh", "-m",
             "-O", obj, obj / ".config",
             src / "kernel" / "configs" / "kvm_guest.config",
             DEBUG_CONFIG], cwd=src, log=log)
        run(make + ["-s", "olddefconfig"], log=log)
        check_fragment(DEBUG_CONFIG, obj / ".config")
        run(make + [f"-j{JOBS}", "bzImage", "modules"], log=log)
        if modroot.exists():
            shutil.rmtree(modroot)
        run(make + ["-s", f"INSTALL_MOD_PATH={modroot}", "modules_install"],
            log=log)
        built.write_text(key + "\n")
    release = output(["make", "-s", "-C", src, f"O={obj}",
                      "kernelrelease"]).strip().splitlines()[-1]
    return Kernel(name=DEBUG, release=release,
                  package=f"{SOURCE_PACKAGE} {version} + debug.config "
                  f"({key})",
                  bzimage=obj / "arch" / "x86" / "boot" / "bzImage",
                  modroot=modroot, kdir=obj,
                  config=read_config(obj / ".config"))


def get(name):
    if name == DEBUG:
        return debug_kernel()
    if name in STOCK_METAPACKAGES:
        return stock_kernel(name)
    raise RigError(f"unknown kernel '{name}'; choose from {' '.join(ALL)}")


def header_packages(names):
    """The linux-headers packages the named stock kernels build against."""
    return [f"linux-headers-{stock_release(n)}" for n in names
            if n in STOCK_METAPACKAGES]
