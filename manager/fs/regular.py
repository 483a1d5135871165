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

Below an upper directory, every component is the sandbox's too: a directory there may be
swapped for a symlink to a host directory while the host reads (a call runs during
``commit -p``'s questions, ``status``, ``diff``). :func:`open_below` walks from the upper
root, each directory opened without following a symlink; :func:`linked_below` checks a
path for it where nothing runs (commit's apply, with the engine stopped).
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


def open_below(root: str, path: str) -> int:
    """:func:`open_regular` of ``path``, which is below ``root``, every directory between
    them opened without following a symlink (OSError ELOOP or ENOTDIR for one)."""
    at, name = parent_below(root, path)
    try:
        return open_regular(name, dir_fd=at)
    finally:
        os.close(at)


def parent_below(root: str, path: str) -> tuple[int, str]:
    """A descriptor (``O_PATH``, the caller's to close) of the directory holding ``path``,
    reached from ``root`` without following a symlink, and the last name."""
    rel = os.path.relpath(path, root)
    if rel == "." or rel.startswith("../") or rel == "..":
        raise NotRegular(errno.EINVAL, "not below its upper directory", path)
    parts = rel.split("/")
    at = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts[:-1]:
            below = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=at)
            os.close(at)
            at = below
    except OSError:
        os.close(at)
        raise
    return at, parts[-1]


def lstat_below(root: str, path: str) -> os.stat_result:
    """``lstat`` of ``path`` below ``root`` (:func:`parent_below`)."""
    at, name = parent_below(root, path)
    try:
        return os.stat(name, dir_fd=at, follow_symlinks=False)
    finally:
        os.close(at)


def readlink_below(root: str, path: str) -> str:
    """The target of the symlink ``path`` below ``root`` (:func:`parent_below`)."""
    at, name = parent_below(root, path)
    try:
        return os.readlink(name, dir_fd=at)
    finally:
        os.close(at)


def read_below(root: str, path: str) -> bytes:
    """The bytes of ``path`` below ``root`` (:func:`open_below`)."""
    with open(open_below(root, path), "rb") as handle:
        return handle.read()


def linked_below(root: str, path: str) -> bool:
    """Whether a directory between ``root`` and ``path`` is not a plain directory (a
    symlink put there): for where nothing changes the upper meanwhile."""
    rel = os.path.relpath(os.path.dirname(path), root)
    if rel == "..":
        return True
    here = root
    for name in [] if rel == "." else rel.split("/"):
        if name == "..":
            return True
        here = os.path.join(here, name)
        try:
            if not stat.S_ISDIR(os.lstat(here).st_mode):
                return True
        except OSError:
            return True
    return False
