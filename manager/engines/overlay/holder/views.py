"""The calls' view of the sandbox: namespaces nested in the holder's (stdlib only).

A call that is root of the holder's user namespace (the engine run by root, or an ordinary
user without subordinate ids) could undo what the holder set up there: unmount its /proc
to show the host's below (and through it host processes' descriptors), remount a read-only
bind of a real file read-write, unmount a mask. The kernel refuses all of it in a mount
namespace copied into a less privileged user namespace: every mount copied there is locked
(it cannot be unmounted to show what is below), and so are its flags (read-only stays so).

So calls never run in the holder's user namespace. The session's init makes a *view*: a
child that copies the sandbox's mount namespace as it is now, mounts the session's own /proc
over the host's (a proc shows the pid namespace of whoever mounts it), then moves into a new
user namespace (the holder's ids, each mapped to itself, written by the init) with a mount
namespace of its own: the locked copy. Calls enter it (enter.sh). A copy does not follow
later mounts, so after each change to the sandbox's mounts (a refresh, a socket shown) the
holder asks for a new view before it answers the call that waits; calls already running
keep theirs. The init keeps the last ``KEEP``, so that a call that has just read which
view is current still finds it.

No process of the holder's user namespace is within a call's reach: the holder is outside
the session's pid namespace; the init is not dumpable (a call of the same uid can neither
ptrace it nor open its /proc entries); a view is born undumpable (as its parent) and becomes
dumpable only once it is nested, where it is no more than a call.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal

from .names import HOLDER_VIEW

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
KEEP = 3              # views the init keeps alive: the current one and those just before
ANSWER_SECONDS = 10.0


# -- in the session's init ---------------------------------------------------------------

def make(libc: ctypes.CDLL, host_proc: int) -> tuple[int, int] | str:
    """A new view: (its pid in the session's pid namespace, its host pid), or why not."""
    order_read, order = os.pipe()
    says, says_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(order)
            os.close(says)
            _nest(libc, host_proc, order_read, says_write)
        finally:
            os._exit(1)
    os.close(order_read)
    os.close(says_write)
    try:
        said = read_line(says)
        if not said.isdigit():
            raise OSError(said or "the view ended")
        host_pid = int(said)
        _map_identity(host_proc, host_pid)
        os.write(order, b"m")
        if read_line(says) != "r":
            raise OSError("the view did not say ready")
        return pid, host_pid
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        return f"the calls' view: {exc}"
    finally:
        os.close(order)
        os.close(says)


def read_line(fd: int, seconds: float = ANSWER_SECONDS) -> str:
    """One short line from a pipe, within ``seconds``; "" at end of file or timeout."""
    data = b""
    while not data.endswith(b"\n"):
        if not select.select([fd], [], [], seconds)[0]:
            return ""
        chunk = os.read(fd, 64)
        if not chunk:
            return ""
        data += chunk
    return data.decode("ascii", errors="replace").strip()


def _map_identity(host_proc: int, host_pid: int) -> None:
    """The view's ids: those of the init's (the holder's) namespace, each to itself. Written
    through the host's /proc as it was before it was locked read-only (run as root)."""
    for name in ("uid_map", "gid_map"):
        with open(os.open(f"self/{name}", os.O_RDONLY, dir_fd=host_proc), encoding="ascii") as f:
            lines = [line.split() for line in f if line.strip()]
        text = "".join(f"{inside} {inside} {count}\n" for inside, _, count in lines)
        fd = os.open(f"{host_pid}/{name}", os.O_WRONLY, dir_fd=host_proc)
        try:
            os.write(fd, text.encode("ascii"))   # one write: the kernel takes no other
        finally:
            os.close(fd)


def _nest(libc: ctypes.CDLL, host_proc: int, order: int, says: int) -> None:
    """In the view (the init's child, undumpable as it): the copy, the session's /proc, the
    nested namespaces; then wait to be ended, holding them."""
    def failed(what: str) -> None:
        os.write(says, f"{what}: {os.strerror(ctypes.get_errno())}\n".encode())
        os._exit(1)

    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if libc.unshare(CLONE_NEWNS) != 0:
        failed("unshare (mount namespace)")
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    # Run as root, the host's /proc below is locked read-only (holder/kernel.py): the kernel
    # takes no proc mount that is less so. Elsewhere read-write, as a call's own was.
    if libc.mount(b"proc", b"/proc", b"proc", flags, None) != 0 and \
            libc.mount(b"proc", b"/proc", b"proc", flags | MS_RDONLY, None) != 0:
        failed("mount the session's /proc")
    host_pid = os.readlink("self", dir_fd=host_proc)
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        failed("unshare (user and mount namespaces)")
    # Nothing of the init's from here (the host's /proc above all): dumpable, the init (not
    # the host's root) may open its map, and a call of the same uid may ptrace it.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    keep = sorted((order, says))
    for low, high in zip([2, *keep], [*keep, 1 << 16], strict=True):
        os.closerange(low + 1, high)
    os.chdir("/")
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)   # enter.sh, as the user, opens its namespaces
    os.write(says, f"{host_pid}\n".encode("ascii"))
    if os.read(order, 1) != b"m":
        return
    os.close(order)
    os.write(says, b"r\n")
    os.close(says)
    while True:
        signal.pause()


class Kept:
    """The init's views, oldest first: (pid in the session's namespace, host pid)."""

    def __init__(self) -> None:
        self.views: list[tuple[int, int]] = []

    def add(self, view: tuple[int, int]) -> None:
        self.views.append(view)
        while len(self.views) > KEEP:
            old, _ = self.views.pop(0)
            with contextlib.suppress(OSError):
                os.kill(old, signal.SIGKILL)   # reaped with the orphans

    def host_pids(self) -> set[int]:
        return {host for _, host in self.views}


# -- in the holder -----------------------------------------------------------------------

def _state_and_start(host_pid: int) -> tuple[str, str]:
    with open(f"/proc/{host_pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return fields[0].decode(), fields[19].decode()


def alive(host_pid: int, start: str) -> bool:
    """Whether the view is still there (a call of the same uid may end one)."""
    try:
        state, started = _state_and_start(host_pid)
    except (OSError, IndexError):
        return False
    return state != "Z" and started == start


def publish(session_fd: int, host_pid: int) -> str:
    """The current view, for enter.sh and the engine: its pid and start time (a pid reused
    by another process does not match), replaced atomically. Returns the start time."""
    start = _state_and_start(host_pid)[1]
    temp = f".{HOLDER_VIEW}.{os.getpid()}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644,
                 dir_fd=session_fd)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(f"{host_pid} {start}\n")
    os.replace(temp, HOLDER_VIEW, src_dir_fd=session_fd, dst_dir_fd=session_fd)
    return start
