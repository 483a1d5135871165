"""Run inside a sandbox (``python3 -c <this file> TARGET``): every way it knows to get a
handle on the host, each tried in a child of its own. A way that reaches the real
filesystem writes TARGET/<way> there; the test looks for those files on the real disk.
It prints what it saw (one line per finding) for the test's message.

stdlib only, and no imports from the project: the sandbox's python3 runs it.
"""

import ctypes
import os
import stat
import sys

TARGET = sys.argv[1].lstrip("/")   # relative: written from whatever "/" a way reached
CLONE_NEWNS = 0x00020000
UPWARD = 40   # deeper than any real path


def child(way, attempt):
    """Run ``attempt`` in a forked child; it writes TARGET/way from where it ends up."""
    pid = os.fork()
    if pid == 0:
        try:
            attempt()
            with open(os.path.join(TARGET, way), "w") as f:
                f.write("escaped\n")
        except Exception:
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def walk_up():
    for _ in range(UPWARD):
        os.chdir("..")


def own_descriptors():
    """Descriptors this program inherited beyond 0-2 (the listing's own fd is closed again by
    the time it is checked, so it drops out)."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            try:
                mode = os.fstat(fd).st_mode
            except OSError:
                continue
            found.append((fd, mode))
    return found


def processes():
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]


def foreign_roots(pids):
    """Processes of the sandbox whose root is not this one (e.g. a helper left at the host's)."""
    mine = os.stat("/")
    found = []
    for pid in pids:
        try:
            st = os.stat(f"/proc/{pid}/root")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) != (mine.st_dev, mine.st_ino):
            found.append(pid)
    return found


def setns_into(pid):
    def attempt():
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
        if libc.setns(fd, CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "setns")
        os.chdir("/")
    return attempt


def chroot_walk():
    os.makedirs("/tmp/.probe-jail", exist_ok=True)
    saved = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    os.chroot("/tmp/.probe-jail")
    os.fchdir(saved)
    walk_up()
    os.chroot(".")


def main():
    for fd, mode in own_descriptors():
        print(f"inherited fd {fd} (mode {oct(mode)})")
        if stat.S_ISDIR(mode):
            child(f"fd{fd}", lambda fd=fd: (os.fchdir(fd), walk_up()))
    pids = processes()
    for pid in foreign_roots(pids):
        print(f"process {pid} has another root")
        child(f"root{pid}", lambda pid=pid: os.chdir(f"/proc/{pid}/root"))
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for name in fds:
            path = f"/proc/{pid}/fd/{name}"
            if os.path.isdir(path):
                print(f"process {pid} holds directory fd {name}")
                child(f"pid{pid}fd{name}", lambda path=path: (os.chdir(path), walk_up()))
        child(f"setns{pid}", setns_into(pid))
    child("chroot", chroot_walk)
    child("plain", walk_up)   # the control: a plain walk stays inside


main()
