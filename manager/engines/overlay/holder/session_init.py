"""pid 1 of the session's pid namespace, and who else runs in the holder's namespaces."""

from __future__ import annotations

import contextlib
import os
import select
import time

CLONE_NEWNS = 0x00020000
PR_SET_PDEATHSIG = 1
ORPHAN_POLL = 0.2   # how soon the session's init ends what a finished call left
SESSION_INIT = 0   # the host pid of the session's pid namespace's init, once started
INIT_JOIN = -1     # a word on it moves the init into the sandbox's mount namespace


def others_in_namespace() -> bool:
    return bool(namespace_members(first=True))


def namespace_members(first: bool = False) -> list[str]:
    """Pids of the other processes in this user namespace (as /proc names them), but the
    holder's own children: the session's init and the holder's passing mount helpers."""
    mine = os.readlink("/proc/self/ns/user")
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if os.readlink(f"/proc/{entry}/ns/user") == mine and \
                        parent_of(int(entry)) != os.getpid():
                    found.append(entry)
                    if first:
                        break
            except OSError:
                continue
    return found


def parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def start_init() -> None:
    """pid 1 of the session's pid namespace, which every call joins: a later call sees and
    signals what an earlier one still runs (a server started in the background), as outside.
    What a call leaves behind when it ends or is killed is orphaned to this init, which ends
    it, as a pid namespace per call did: nothing outlives its call unseen. It dies with the
    holder, taking the namespace along. Started before the sandbox exists (it must be the
    first child), it moves into the sandbox's mount namespace when the holder has pivoted
    (:func:`init_join`): a call sees it, and a command that is root in the namespace could
    otherwise take its root (/proc/1/root) or namespace (setns) as a way to the host's."""
    import ctypes

    global SESSION_INIT, INIT_JOIN
    holder = os.getpid()
    alive_read, _alive_write = os.pipe()   # the holder keeps the write end until it exits
    join_read, INIT_JOIN = os.pipe()
    pid = os.fork()
    if pid:
        os.close(alive_read)
        os.close(join_read)
        SESSION_INIT = pid
        return
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)   # SIGKILL
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        keep = sorted((alive_read, join_read))
        os.closerange(3, keep[0])
        os.closerange(keep[0] + 1, keep[1])
        os.closerange(keep[1] + 1, 1 << 16)
        os.chdir("/")
        _join_sandbox(holder, join_read)
        _end_orphans(alive_read)
    finally:
        os._exit(0)


def _join_sandbox(holder: int, join_read: int) -> None:
    """Wait for the holder's word, then enter its (pivoted) mount namespace; its root and
    working directory become the sandbox's. Nothing to join (the holder failed): exit."""
    import ctypes

    if os.read(join_read, 1) != b"j":
        os._exit(0)
    os.close(join_read)
    fd = os.open(f"/proc/{holder}/ns/mnt", os.O_RDONLY)
    if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNS) != 0:
        os._exit(1)   # the holder sees its init gone and does not say ready
    os.close(fd)
    os.chdir("/")


def init_join() -> None:
    """Move the session's init into the holder's mount namespace, and wait until it is there."""
    os.write(INIT_JOIN, b"j")
    os.close(INIT_JOIN)
    mine = os.readlink("/proc/self/ns/mnt")
    deadline = time.monotonic() + 10
    while _readlink(f"/proc/{SESSION_INIT}/ns/mnt") != mine:
        if init_gone() or time.monotonic() > deadline:
            raise RuntimeError("the session's init could not enter the sandbox's mount namespace")
        time.sleep(0.001)


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def _end_orphans(holder_alive: int) -> None:
    """This init starts nothing, so each child it has is an orphan of a call: end it (its
    own children follow on the next rounds), reap the dead, until the holder is gone."""
    while True:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        for host_pid in _children():
            with contextlib.suppress(OSError):
                os.kill(_pid_inside(host_pid), 9)
        if select.select([holder_alive], [], [], ORPHAN_POLL)[0]:
            return


def _children() -> list[int]:
    """This process's children, as host pids (its /proc is the host's)."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children", encoding="ascii") as f:
                found += map(int, f.read().split())
    return found


def _pid_inside(host_pid: int) -> int:
    """The pid of a host pid in this init's pid namespace. Not the innermost one: an orphan
    that made a pid namespace of its own is pid 1 there, and a kill of 1 is this init's."""
    mine = _nspids("self")
    return _nspids(host_pid)[len(mine) - 1]


def _nspids(pid: int | str) -> list[int]:
    """NSpid: the pid in each pid namespace, from this /proc's (the host's) inwards."""
    with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("NSpid:"):
                return [int(n) for n in line.split()[1:]]
    raise OSError(f"no NSpid for {pid}")


def init_gone() -> bool:
    try:
        return SESSION_INIT != 0 and os.waitpid(SESSION_INIT, os.WNOHANG)[0] != 0
    except ChildProcessError:
        return True


