"""What of the kernel a command inside the overlay engine's sandbox reaches, besides files.

Run as real root, the namespace maps every id to itself: a command is the host's uid 0,
and the kernel's interfaces that check only the owner (a sysctl under /proc/sys, a sysfs
attribute, a device node) would act on the host. Two rules close that, held by the kernel
itself rather than by what a command may or may not do inside:

* ``lock_host_views`` (root only): before the holder makes its user namespace, /proc and
  /sys are made read-only in a mount namespace of the host's user namespace. The
  namespace the holder then makes copies them *locked* (the kernel's rule for a less
  privileged copy): no one inside may make them writable again, unmount what covers them,
  or mount a proc or sysfs that is less read-only. Every proc a call mounts is read-only.
* ``minimal_dev``: /dev inside is a tmpfs with the harmless nodes only (bound from the
  host), a devpts of its own and /dev/shm; no host device is under it to uncover, and a
  node made inside cannot be opened (tmpfs in a user namespace is nodev; mknod of a device
  needs the host's CAP_MKNOD).

An ordinary user's commands are contained by the kernel already (they are not the host's
uid 0); /dev is the same for them. Stdlib only: the holder (run with -I) imports this.
"""

from __future__ import annotations

import ctypes
import os
import struct
import subprocess

from . import mountinfo

CLONE_NEWNS = 0x00020000
SYS_MOUNT_SETATTR = 442        # the same on every architecture (added after the unified table)
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
MS_BIND = 0x1000
MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x2, 0x4, 0x8
READ_ONLY = ("/proc", "/sys")
# What OCI runtimes put in /dev, but the console: nodes that reach no host state.
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
             "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"}


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def lock_host_views() -> None:
    """A mount namespace of the host's user namespace with /proc and /sys read-only, all
    their submounts too; for the holder to make its own namespaces from (as root only)."""
    libc = _libc()
    _check(libc.unshare(CLONE_NEWNS), "unshare (mount namespace)")
    _check(libc.mount(b"none", b"/", None, 0x40000 | 0x4000, None), "make / private")  # MS_PRIVATE|MS_REC
    for point in READ_ONLY:
        if os.path.isdir(point):
            read_only(point)


def read_only(point: str) -> None:
    """``point`` and every mount below it read-only (mount_setattr, Linux >= 5.12; else one
    remount per mount)."""
    attr = struct.pack("QQQQ", MOUNT_ATTR_RDONLY, 0, 0, 0)
    libc = _libc()
    if libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, point.encode(), AT_RECURSIVE, attr,
                    len(attr)) == 0:
        return
    for mounted in _mounts_at_or_below(point):
        proc = subprocess.run(["mount", "-o", "remount,bind,ro", mounted], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise OSError(f"cannot make {mounted} read-only: {proc.stderr.strip()}")


def _mounts_at_or_below(point: str) -> list[str]:
    found = {p for p in mountinfo.points(mountinfo.read()) if p == point or p.startswith(point + "/")}
    return sorted(found, key=lambda p: p.count("/"))


def minimal_dev(target: str, host_dev: str = "/dev") -> None:
    """Make ``target`` the sandbox's /dev (see the module's note); raises when it cannot."""
    libc = _libc()
    _check(libc.mount(b"tmpfs", target.encode(), b"tmpfs", MS_NOSUID | MS_NOEXEC,
                      b"mode=755,size=65536k"), f"mount a tmpfs on {target}")
    for name in DEV_NODES:
        real = os.path.join(host_dev, name)
        if not os.path.exists(real):
            continue
        node = os.path.join(target, name)
        os.close(os.open(node, os.O_CREAT | os.O_WRONLY, 0o666))
        _check(libc.mount(real.encode(), node.encode(), None, MS_BIND, None), f"bind {real}")
    pts = os.path.join(target, "pts")
    os.mkdir(pts, 0o755)
    _check(libc.mount(b"devpts", pts.encode(), b"devpts", MS_NOSUID | MS_NOEXEC,
                      b"newinstance,ptmxmode=0666,mode=0620"), "mount a devpts of its own")
    for name, link in DEV_LINKS.items():
        os.symlink(link, os.path.join(target, name))
    os.mkdir(os.path.join(target, "shm"), 0o1777)
    os.chmod(os.path.join(target, "shm"), 0o1777)
