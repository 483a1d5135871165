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
namespace of its own: the locked copy. It hands the holder, through the init, descriptors of
that user namespace, that mount namespace and its root, and exits: no process is left for a
call to take over or end. The holder keeps them in fixed descriptor slots (``SLOTS``, a ring
of ``KEEP``) and names the current ones in ``holder.view``; calls enter them through
/proc/HOLDER/fd (enter.sh). A copy does not follow later mounts, so after each change to the
sandbox's mounts (a refresh, a socket shown) the holder has a new view made before it answers
the call that waits; calls already running keep theirs. A slot only ever holds a view's
descriptor of its kind, so a call that read the names just before a slot was reused still
enters a view.

No process of the holder's user namespace is within a call's reach: the holder is outside
the session's pid namespace; the init is not dumpable (a call of the same uid can neither
ptrace it nor open its /proc entries) and sets no signal handler; a view, dumpable only while
the init writes its map (no call is in its namespace then), is gone before any call enters.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import socket

from .names import HOLDER_VIEW
from .names import HOLDER_VIEWS

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
KEEP = 3              # views the holder keeps: the current one and those just before
ANSWER_SECONDS = 10.0
HANDED = ("/proc/self/ns/user", "/proc/self/ns/mnt", "/")   # what a view hands over
SLOTS = 900           # the holder's descriptors KEEP views are kept in: SLOTS + 3 * i + j,
                      # above any the holder opens for itself


# -- in the session's init ---------------------------------------------------------------

def calls_are_root(host_proc: int) -> bool:
    """Whether calls are root of the views' namespace: one line in the holder's map (run by
    root, or a single mapping). Otherwise a call is the user's uid without capabilities and
    no view is within its reach, so each view stays, for the user's entry to open."""
    with open(os.open("self/uid_map", os.O_RDONLY, dir_fd=host_proc), encoding="ascii") as f:
        return len([line for line in f if line.strip()]) == 1


def make(libc: ctypes.CDLL, host_proc: int, stays: bool) -> tuple[list[int], int, int] | str:
    """A new view: descriptors of its user namespace, mount namespace and root, with its
    pid here and on the host when it ``stays`` (0, 0: it has exited); or why not."""
    order_read, order = os.pipe()
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        try:
            os.close(order)
            mine.close()
            _nest(libc, host_proc, order_read, theirs, stays)
        finally:
            os._exit(1)
    os.close(order_read)
    theirs.close()
    host_pid = 0
    try:
        said = hear(mine)[0]
        if not said.isdigit():
            raise OSError(said or "the view ended")
        host_pid = int(said)
        _map_identity(host_proc, host_pid)
        os.write(order, b"m")
        said, handed = hear(mine)
        if said != "r" or len(handed) != len(HANDED):
            for fd in handed:
                os.close(fd)
            raise OSError("the view did not hand its namespaces over")
        return (handed, pid, host_pid) if stays else (handed, 0, 0)
    except OSError as exc:
        stays = False
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        return f"the calls' view: {exc}"
    finally:
        if not stays:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        os.close(order)
        mine.close()


def hear(channel: socket.socket, seconds: float = ANSWER_SECONDS) -> tuple[str, list[int]]:
    """The next word on ``channel`` (the view's to the init, the init's to the holder) and
    the descriptors sent with it, within ``seconds``; "" and none at timeout."""
    if not select.select([channel], [], [], seconds)[0]:
        return "", []
    data, fds, _, _ = socket.recv_fds(channel, 1024, len(HANDED))
    return data.decode("ascii", errors="replace").strip(), list(fds)


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


def _nest(libc: ctypes.CDLL, host_proc: int, order: int, says: socket.socket, stays: bool) -> None:
    """In the view (the init's child, undumpable as it): the copy, the session's /proc, the
    nested namespaces; their descriptors handed to the init, then gone (or, ``stays``,
    holding them while the init keeps it)."""
    def failed(what: str) -> None:
        says.sendall(f"{what}: {os.strerror(ctypes.get_errno())}\n".encode())
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
    # Nothing of the init's from here (the host's /proc above all); dumpable, so that the init
    # (not the host's root) may open its map: no call is in this namespace yet.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    keep = sorted((order, says.fileno()))
    for low, high in zip([2, *keep], [*keep, 1 << 16], strict=True):
        os.closerange(low + 1, high)
    os.chdir("/")
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    says.sendall(f"{host_pid}\n".encode("ascii"))
    if os.read(order, 1) != b"m":
        return
    handed = [os.open(path, os.O_RDONLY | os.O_CLOEXEC) for path in HANDED]
    socket.send_fds(says, [b"r\n"], handed)
    says.close()
    for fd in handed:
        os.close(fd)
    while stays:
        signal.pause()
    os._exit(0)


class Kept:
    """The views the init keeps alive (calls not root: see calls_are_root), oldest first:
    (pid in the session's namespace, host pid)."""

    def __init__(self) -> None:
        self.views: list[tuple[int, int]] = []

    def add(self, pid: int, host_pid: int) -> None:
        self.views.append((pid, host_pid))
        while len(self.views) > KEEP:
            old, _ = self.views.pop(0)
            with contextlib.suppress(OSError):
                os.kill(old, signal.SIGKILL)   # reaped with the orphans

    def host_pids(self) -> set[int]:
        return {host for _, host in self.views}


# -- in the holder -----------------------------------------------------------------------

class Slots:
    """The holder's ring of views: each view's descriptors dup'ed to its fixed slot numbers
    (closing the view that held the slot before), the current one published."""

    def __init__(self) -> None:
        self.made = 0
        self.staying: list[str] = []   # "PID START" of the views that stay, newest last

    def keep(self, session_fd: int, handed: list[int], view: int) -> None:
        """Keep a view's descriptors; publish where the entry opens them: the holder's slots,
        or the view itself when it stays (``view``, its host pid: the user cannot open the
        descriptors of a holder whose root is a subordinate id)."""
        base = SLOTS + len(HANDED) * (self.made % KEEP)
        for offset, fd in enumerate(handed):
            os.dup2(fd, base + offset, inheritable=False)
            os.close(fd)
        self.made += 1
        if view:
            with open(f"/proc/{view}/stat", "rb") as f:
                start = f.read().rsplit(b")", 1)[1].split()[19].decode()
            paths = f"/proc/{view}/root /proc/{view}/ns/user /proc/{view}/ns/mnt {view} {start}"
            self.staying = [*self.staying, f"{view} {start}"][-KEEP:]   # as the init keeps
            publish(session_fd, "".join(f"{line}\n" for line in self.staying), HOLDER_VIEWS)
        else:
            held = f"/proc/{os.getpid()}/fd/"
            paths = f"{held}{base + 2} {held}{base} {held}{base + 1}"
        publish(session_fd, f"{self.made} {paths}\n")


def publish(session_fd: int, text: str, name: str = HOLDER_VIEW) -> None:
    """The current view, for enter.sh and the engine (generation; the paths of its root,
    user and mount namespaces; the view's pid and start time when it stays), or the views
    that stay (``HOLDER_VIEWS``: the engine leaves them out of the session's processes),
    replaced atomically."""
    temp = f".{name}.{os.getpid()}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644,
                 dir_fd=session_fd)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(text)
    os.replace(temp, name, src_dir_fd=session_fd, dst_dir_fd=session_fd)
