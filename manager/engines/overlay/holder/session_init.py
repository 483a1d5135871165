"""pid 1 of the session's pid namespace, and who else runs in the holder's namespaces."""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import socket
import time

from . import pidns
from . import strays
from . import views

CLONE_NEWNS = 0x00020000
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
ORPHAN_POLL = 0.2   # how soon the session's init ends what a finished call left
END_SECONDS = 1.0   # at most, per look, for ending what calls left (a flood: the next goes on)
SESSION_INIT = 0   # the host pid of the session's pid namespace's init, once started
INIT_JOIN = -1     # the holder's words to the init: join the sandbox, make a view
INIT_SAYS: socket.socket | None = None   # the init's answers, with a view's descriptors
HOST_PROC = -1     # /proc as it was before it was locked read-only (root): views' maps
VIEW_PIDS: list[int] = []   # host pids of the views that stay (holder/views.py), newest last


def others_in_namespace() -> bool:
    return bool(namespace_members(first=True))


def namespace_members(first: bool = False) -> list[str]:
    """Pids of the other processes in this user namespace or the session's pid namespace or
    one below it (calls run in views nested in it: holder/views.py; holder/pidns.py), as
    /proc names them, but the holder's own children (the session's init, passing mount
    helpers) and the views."""
    mine = os.readlink("/proc/self/ns/user")
    session = pidns.inode("/proc/self/ns/pid_for_children")
    if session == pidns.inode("/proc/self/ns/pid"):
        session = -1   # no pid namespace of the session's (a hand-back)
    skip = {os.getpid(), SESSION_INIT, *VIEW_PIDS}
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in skip:
            try:
                if (os.readlink(f"/proc/{entry}/ns/user") == mine
                        or pidns.below(entry, session)) and \
                        strays.parent_of(entry) != os.getpid():
                    found.append(entry)
                    if first:
                        break
            except OSError:
                continue
    return found


def start_init() -> None:
    """pid 1 of the session's pid namespace, which every call joins: a later call sees and
    signals what an earlier one still runs (a server started in the background), as outside.
    What a call leaves behind when it ends or is killed is orphaned to this init, which ends
    it, as a pid namespace per call did: nothing outlives its call unseen. It dies with the
    holder, taking the namespace along. Started before the sandbox exists (it must be the
    first child), it moves into the sandbox's mount namespace when the holder has pivoted
    (:func:`init_join`): a call sees it, and a command that is root in the namespace could
    otherwise take its root (/proc/1/root) or namespace (setns) as a way to the host's."""
    global SESSION_INIT, INIT_JOIN, INIT_SAYS
    holder = os.getpid()
    alive_read, _alive_write = os.pipe()   # the holder keeps the write end until it exits
    join_read, INIT_JOIN = os.pipe()
    INIT_SAYS, says = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid:
        os.close(alive_read)
        os.close(join_read)
        says.close()
        SESSION_INIT = pid
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)   # SIGKILL
        # Before any call exists: no call of the same uid may ptrace it or open its /proc
        # entries (it is of the holder's user namespace, with its capabilities).
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        # The kernel passes a signal from inside its pid namespace to its init only where a
        # handler is set (Python's for SIGINT, the holder's): none, so no call can end it.
        for signum in signal.valid_signals():
            with contextlib.suppress(OSError, ValueError):
                signal.signal(signum, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        INIT_SAYS.close()
        keep = sorted((alive_read, join_read, says.fileno(), HOST_PROC))
        for low, high in zip([2, *keep], [*keep, 1 << 16], strict=True):
            os.closerange(low + 1, high)
        os.chdir("/")
        _join_sandbox(libc, holder, join_read, says)
        _serve(libc, alive_read, join_read, says)
    finally:
        os._exit(0)


def _join_sandbox(libc: ctypes.CDLL, holder: int, join_read: int, says: socket.socket) -> None:
    """Wait for the holder's word, then enter its (pivoted) mount namespace; its root and
    working directory become the sandbox's. Nothing to join (the holder failed): exit."""
    if os.read(join_read, 1) != b"j":
        os._exit(0)
    fd = os.open(f"/proc/{holder}/ns/mnt", os.O_RDONLY)
    if libc.setns(fd, CLONE_NEWNS) != 0:
        os._exit(1)   # the holder sees its init gone and does not say ready
    os.close(fd)
    os.chdir("/")
    says.sendall(b"joined\n")


def init_join() -> None:
    """Move the session's init into the holder's mount namespace, and wait until it is there."""
    os.write(INIT_JOIN, b"j")
    if _answer()[0] != "joined":
        raise RuntimeError("the session's init could not enter the sandbox's mount namespace")


def new_view() -> tuple[list[int], int]:
    """Ask the init for a new view of the sandbox as it is now (holder/views.py): its
    descriptors, and its host pid when it stays (else 0). RuntimeError when it could not
    make one."""
    os.write(INIT_JOIN, b"v")
    said, handed = _answer()
    word, _, pid = said.partition(" ")
    if word != "view" or not pid.isdigit() or len(handed) != len(views.HANDED):
        for fd in handed:
            os.close(fd)
        raise RuntimeError(said or "the session's init did not answer for the calls' view")
    if int(pid):
        VIEW_PIDS.append(int(pid))
        del VIEW_PIDS[:-views.KEEP - 1]
    return handed, int(pid)


def _answer() -> tuple[str, list[int]]:
    assert INIT_SAYS is not None
    return views.hear(INIT_SAYS, views.ANSWER_SECONDS * 2)   # the init waits on its view


def _serve(libc: ctypes.CDLL, holder_alive: int, requests: int, says: socket.socket) -> None:
    """Make the views the holder asks for. This init starts nothing else, so each other child
    it has is an orphan of a call: end it with all it started (:func:`_end_trees`), as each
    process of the session whose parent is outside it and no entry (holder/strays.py); reap
    the dead, until the holder is gone."""
    kept = views.Kept()
    stays = not views.calls_are_root(HOST_PROC)   # the holder's map: fixed for its life
    session_pidns = os.stat("/proc/self/ns/pid").st_ino
    session_proc = -1   # the newest view's /proc: the session's pid namespace's
    while True:
        found = strays.strays(session_proc, session_pidns) if session_proc >= 0 else []
        _end_trees(kept.host_pids(), found)
        ready = select.select([holder_alive, requests], [], [], ORPHAN_POLL)[0]
        if holder_alive in ready or (requests in ready and os.read(requests, 1) != b"v"):
            return
        if requests in ready:
            view = views.make(libc, HOST_PROC, stays)
            if isinstance(view, str):
                says.sendall(view.replace("\n", " ").encode() + b"\n")
                continue
            handed, pid, host_pid = view
            if pid:
                kept.add(pid, host_pid)
            session_proc = _session_proc(handed[views.HANDED.index("/")], session_proc)
            socket.send_fds(says, [f"view {host_pid}\n".encode()], handed)
            for fd in handed:
                os.close(fd)


def _session_proc(view_root: int, old: int) -> int:
    """The /proc of a new view (``view_root``), in place of ``old``; ``old`` when it has none."""
    try:
        fd = os.open("proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=view_root)
    except OSError:
        return old
    if old >= 0:
        os.close(old)
    return fd


def _end_trees(kept: set[int], strays_found: list[int]) -> None:
    """Kill every orphan (each child of this init but the views it ``kept``) and stray, then
    look again -- the dead reaped, so that what they started is this init's child now --
    until no one is left. Killed, not stopped first: a clone under way when SIGSTOP comes
    completes, and one of CLONE_PARENT makes a sibling no look below the stopped finds
    (attack pass 15); a fatal signal undoes the clone. A chain that forks its successor
    before each exit (attack pass 13) is this init's child at the next look."""
    deadline = time.monotonic() + END_SECONDS
    found = strays_found
    while True:
        _reap()
        found = found + [pid for pid in _children() if pid not in kept]
        if not found:
            return
        for host_pid in found:
            with contextlib.suppress(OSError):
                os.kill(_pid_inside(host_pid), signal.SIGKILL)
        if time.monotonic() > deadline:
            return   # a flood: the next look goes on
        found = []


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _children(pid: int | str = "self") -> list[int]:
    """A process's children (this one's by default), as host pids (this init's /proc is the
    holder's, the host's process list)."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), \
                    open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as f:
                found += map(int, f.read().split())
    return found


def _pid_inside(host_pid: int) -> int:
    """The pid of a host pid in this init's pid namespace. Not the innermost one: an orphan
    that made a pid namespace of its own is pid 1 there, and a kill of 1 is this init's.
    OSError when it is not in this namespace (gone, its pid another's)."""
    mine, theirs = _nspids("self"), _nspids(host_pid)
    if len(theirs) < len(mine):
        raise OSError(f"{host_pid} is not in the session's pid namespace")
    return theirs[len(mine) - 1]


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


