"""Whether a process is the session's: in its pid namespace or one below it (stdlib only).

A call may make a process in pid and user namespaces of its own (``unshare -pU``, or a
clone with CLONE_NEWPID | CLONE_NEWUSER), and, by ptrace of its own top, one whose parent
is outside the session's pid namespace, which the session's init never ends (attack pass
14). Every such process is still below the session's pid namespace: that is what makes it
the session's, for ``workspace status``, commit's wait and the holder's idle clock.
"""

from __future__ import annotations

import fcntl
import os

NS_GET_PARENT = 0xB702   # _IO(0xb7, 0x2): the parent of a pid or user namespace
DEPTH = 33               # pid namespaces nest at most 32 deep


def inode(path: str) -> int:
    """The namespace's inode (``path``: a /proc/PID/ns/pid link); 0 when unreadable."""
    try:
        return os.stat(path).st_ino
    except OSError:
        return 0


def below(pid: str, session: int) -> bool:
    """Whether process ``pid``'s pid namespace is the session's (inode ``session``) or
    nested in it."""
    try:
        fd = os.open(f"/proc/{pid}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        for _ in range(DEPTH):
            if os.fstat(fd).st_ino == session:
                return True
            parent = fcntl.ioctl(fd, NS_GET_PARENT)
            os.close(fd)
            fd = parent
    except OSError:   # the host's (no parent), or one out of this process's reach
        return False
    finally:
        os.close(fd)
    return False
