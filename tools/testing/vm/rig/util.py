# SPDX-License-Identifier: GPL-2.0
"""Paths, command running and progress output shared by the rig."""

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
VM_DIR = REPO / "tools" / "testing" / "vm"

# Downloaded packages, unpacked and built kernels, base initramfs images: kept
# between runs, outside the repository, keyed by what they are made from.
CACHE = Path(os.environ.get("RSTREAM_CACHE") or
             Path(os.environ.get("XDG_CACHE_HOME") or
                  Path.home() / ".cache") / "rstream")

# Per-run outputs (module builds, test programs, overlays, console logs):
# inside the repository, ignored by git.
OUT = Path(os.environ.get("RSTREAM_OUT") or REPO / "build")

JOBS = os.cpu_count() or 1


class RigError(Exception):
    """A failure of the rig itself (download, build, boot), with its cause."""


def say(msg):
    print(msg, flush=True)


def run(cmd, cwd=None, env=None, log=None, check=True, capture=False):
    """Run a command; with log=, append its output there and show the
    last lines if it fails."""
    cmd = [str(c) for c in cmd]
    full_env = dict(os.environ, **(env or {}))
    if capture:
        res = subprocess.run(cmd, cwd=cwd, env=full_env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elif log:
        with open(log, "a") as f:
            f.write(f"$ {' '.join(cmd)}\n")
            f.flush()
            res = subprocess.run(cmd, cwd=cwd, env=full_env, stdout=f,
                                 stderr=subprocess.STDOUT)
    else:
        res = subprocess.run(cmd, cwd=cwd, env=full_env)
    if check and res.returncode != 0:
        detail = ""
        if capture:
            detail = (res.stderr or res.stdout).strip()
        elif log:
            detail = tail(log, 30)
        raise RigError(f"command failed (exit {res.returncode}): "
                       f"{' '.join(cmd)}\n{detail}")
    return res


def output(cmd, cwd=None):
    return run(cmd, cwd=cwd, capture=True).stdout


def tail(path, n):
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def digest(*parts):
    """A short key for a cache entry made from these strings and files."""
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, Path):
            h.update(p.read_bytes())
        else:
            h.update(str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:12]


def stamp_ok(d):
    return (Path(d) / ".complete").exists()


def stamp(d):
    (Path(d) / ".complete").write_text(time.strftime("%F %T\n"))


def fresh_dir(d):
    d = Path(d)
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    return d


def is_root():
    return os.geteuid() == 0


def apt_install(packages):
    """Install Debian packages that are missing (root only)."""
    missing = [p for p in packages if not dpkg_installed(p)]
    if not missing:
        return
    if not is_root():
        raise RigError("missing packages: " + " ".join(missing) +
                       "\nrun as root: apt-get install " + " ".join(missing))
    say(f"installing {' '.join(missing)}")
    run(["apt-get", "install", "-y", "-q", "--no-install-recommends"] +
        missing, env={"DEBIAN_FRONTEND": "noninteractive"},
        log=OUT / "apt.log")


def dpkg_installed(package):
    res = run(["dpkg-query", "-W", "-f=${Status}", package], capture=True,
              check=False)
    return res.returncode == 0 and "install ok installed" in res.stdout


def dpkg_version(package):
    res = run(["dpkg-query", "-W", "-f=${Version}", package], capture=True,
              check=False)
    return res.stdout.strip() if res.returncode == 0 else "absent"


def apt_candidate(package):
    """The version apt would install, or raise if apt does not know it."""
    res = run(["apt-cache", "show", "--no-all-versions", package],
              capture=True, check=False)
    for line in res.stdout.splitlines():
        if line.startswith("Version: "):
            return line.split(" ", 1)[1].strip()
    raise RigError(f"apt does not know {package}; run 'apt-get update' "
                   "(make deps does)")


def apt_download(package, version):
    """The .deb of package=version, downloaded once into the cache."""
    debs = CACHE / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    pattern = f"{package}_{version.replace(':', '%3a')}_*.deb"
    found = sorted(debs.glob(pattern))
    if not found:
        say(f"downloading {package} {version}")
        run(["apt-get", "download", "-q", f"{package}={version}"], cwd=debs,
            log=OUT / "apt.log")
        found = sorted(debs.glob(pattern))
        if not found:
            raise RigError(f"apt-get download gave no {pattern} in {debs}")
    return found[0]
