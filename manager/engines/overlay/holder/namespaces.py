"""The holder's own namespaces: a user and mount namespace mapped by the launcher, and the
pivot into the sandbox's root."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from . import session_init
from .build import run_mount
from .session_init import start_init

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
CLONE_NEWCGROUP = 0x02000000
PR_SET_DUMPABLE = 4


# pivot_root has no libc wrapper; its number per architecture (the binary otherwise).
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "loongarch64": 41,
                  "ppc64le": 203, "ppc64": 203, "s390x": 217, "i686": 217, "armv7l": 218}
MNT_DETACH = 2


def pivot(root: Path) -> int:
    """Make ``root`` this process's root in a mount namespace of its own, with the host's
    root detached from it: a command that is root in the namespace can chroot and walk
    ``..`` as it likes, it stays in the sandbox (a chroot over the still-mounted host's root
    would let it out). The host's namespace stays open (returned): the holder reads the
    real files through descriptors opened before, and makes the mounts of a refresh there
    (``overlay_levels.host_view``)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    host_ns = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)

    def check(result: int, what: str) -> None:
        if result != 0:
            raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")

    check(libc.unshare(CLONE_NEWNS), "unshare")
    os.chdir(root)
    number = SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is not None:
        check(libc.syscall(number, b".", b"."), f"pivot_root {root}")
    else:
        tool = shutil.which("pivot_root", path="/usr/sbin:/sbin:/usr/bin:/bin")
        if tool is None or subprocess.run([tool, ".", "."], capture_output=True).returncode != 0:
            raise OSError(f"pivot_root {root} failed")
    check(libc.umount2(b".", MNT_DETACH), "detach the host's root")
    os.chdir("/")
    return host_ns


def enter_namespaces(pid_namespace: bool = False, net_namespace: bool = False,
                     sandbox: Path | None = None) -> None:
    """New user and mount namespaces (and a pid namespace for this process's children),
    mapped by the launcher; then their root."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    flags = 0
    if pid_namespace:   # the views' maps are written through it (holder/views.py)
        session_init.HOST_PROC = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    if pid_namespace and os.geteuid() == 0:   # roothard: /proc, /sys locked read-only inside
        from . import cgroups
        from . import kernel

        if sandbox is not None:   # before /sys is read-only: a cgroup subtree of its own
            try:
                cgroups.confine(sandbox)
                flags |= CLONE_NEWCGROUP
            except OSError as exc:   # a read-only cgroup file system (a container): as before
                print(f"note: the session's cgroups are not its own: {exc}", file=sys.stderr,
                      flush=True)
        kernel.lock_host_views()
    flags |= CLONE_NEWUSER | CLONE_NEWNS | (CLONE_NEWPID if pid_namespace else 0)
    flags |= CLONE_NEWIPC if pid_namespace else 0   # roothard: not the host's SysV IPC objects
    flags |= CLONE_NEWNET if net_namespace else 0   # setting `network` (holder/egress_proxy.py)
    if libc.unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), f"unshare: {os.strerror(ctypes.get_errno())}")
    print("userns", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise RuntimeError("the launcher did not map this namespace's ids")
    if os.getuid() != 0:   # the user's own uid maps to itself: root is a subordinate id
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
        # A changed uid makes the process undumpable, and its /proc/PID/ns and root
        # unreachable for the user's calls: they must reach them.
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    if pid_namespace:
        start_init()   # the first child is pid 1: before any helper process runs
    error = run_mount("--make-rprivate", "/")   # as `unshare --mount` does
    if error:
        raise RuntimeError(f"mount --make-rprivate /: {error}")


