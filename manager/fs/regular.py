"""**The** way the host opens a file a sandbox may have made: only a regular file, proven
before the open.

An upper directory holds what the sandbox's processes made, and one holding CAP_MKNOD (a
root call in docker's container) can make a device node of any number. Opening a device
acts on the host (a watchdog's open arms it, a tape rewinds); a FIFO's open blocks; a
socket's fails. So the path is first reached with ``O_PATH`` (which opens nothing: no
driver runs), its type read from that descriptor, and only a regular file is then opened,
through the descriptor's ``/proc/self/fd`` link: the very inode just checked, whatever
the sandbox renames in between. Directories need none of this: ``O_DIRECTORY`` refuses
anything else before any driver is asked.
"""

from __future__ import annotations

import errno
import os
import stat


class NotRegular(OSError):
    """The entry is not a regular file: it was not opened."""


def open_regular(path: str | os.PathLike[str], *, dir_fd: int | None = None) -> int:
    """A read-only descriptor of ``path`` (not followed if it is a symlink) when it is a
    regular file; :class:`NotRegular` (an ``OSError``) for anything else, unopened."""
    pinned = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        before = os.fstat(pinned)
        if not stat.S_ISREG(before.st_mode):
            raise NotRegular(errno.EINVAL, "not a regular file", os.fspath(path))
        # The magic link names the pinned inode: no lookup of ``path`` again.
        fd = os.open(f"/proc/self/fd/{pinned}",
                     os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    finally:
        os.close(pinned)
    after = os.fstat(fd)
    if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (before.st_dev,
                                                                            before.st_ino):
        os.close(fd)
        raise NotRegular(errno.EINVAL, "not the file that was checked", os.fspath(path))
    return fd


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The bytes of ``path`` when it is a regular file (:func:`open_regular`)."""
    fd = open_regular(path)
    with open(fd, "rb") as handle:
        return handle.read()
