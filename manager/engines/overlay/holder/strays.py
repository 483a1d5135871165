"""Processes of the session whose parent is outside it and no entry (stdlib only).

The session's init ends what a call leaves behind: an orphan inside the session's pid
namespace is re-parented to it. A call's top is the exception: it is the child of the entry
(nsenter, outside that namespace), and a call that ptraces its top can make it fork with
CLONE_PARENT (attack pass 14). That process is the entry's child too; when the entry exits,
the kernel re-parents it to the host's reaper (or a subreaper above the entry), never to the
init. So the init keeps a rule on each look: a process of the session (in its pid namespace
or one below) whose parent is outside it is a child of an *entry* -- a process outside that
sends its children into the session's pid namespace (its ``pid_for_children``: an entry, or
the holder) -- or a *stray*, ended with all below it. While its entry runs, such a sibling is
part of a call that runs; the entry's exit ends it as it ends the call's top.
"""

from __future__ import annotations

import contextlib
import os


def strays(session_proc: int, session_pidns: int) -> list[int]:
    """Host pids of the session's strays. ``session_proc``: a /proc of the session's pid
    namespace (a view's), whose stat shows parent 0 for a parent outside it; the host's
    /proc is this process's own."""
    found = []
    for entry in os.listdir(session_proc):
        if not entry.isdigit() or entry == "1" or parent_of(entry, session_proc) != 0:
            continue
        host = _host_pid(int(entry))
        if host is not None and not _is_entry(parent_of(host), session_pidns):
            found.append(host)
    return found


def parent_of(pid: int | str, proc: int | None = None) -> int | None:
    """The parent's pid as ``proc`` (default: this process's /proc) numbers them."""
    try:
        fd = os.open(f"{pid}/stat", os.O_RDONLY | os.O_CLOEXEC, dir_fd=proc) if proc is not None \
            else os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return int(os.read(fd, 4096).rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
    finally:
        os.close(fd)


def _host_pid(pid: int) -> int | None:
    """The host pid of ``pid`` of this process's pid namespace (the session's, as its init):
    what a pidfd's fdinfo says through this process's /proc (the host's)."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return None
    try:
        with open(f"/proc/self/fdinfo/{pidfd}", encoding="ascii") as f:
            for line in f:
                if line.startswith("Pid:"):
                    host = int(line.split()[1])
                    return host if host > 0 else None
    except (OSError, ValueError, IndexError):
        return None
    finally:
        os.close(pidfd)
    return None


def _is_entry(pid: int | None, session_pidns: int) -> bool:
    """Whether ``pid`` (a host pid) sends its children into the session's pid namespace. One
    this process may not look at (the host's reaper, run by root) is not."""
    if pid is None or pid <= 0:
        return False
    with contextlib.suppress(OSError):
        return os.stat(f"/proc/{pid}/ns/pid_for_children").st_ino == session_pidns
    return False
