"""What a commit's plan judged of each upper entry, and the rule that the entry it copies is
still that one (attack passes 19 and 21).

The plan decides on each upper entry as it finds it: special or not (``--allow-special``),
a conflict or not, a tree that may go whole. What is copied later must be that entry, or
the decision was about something else: a resumed commit copied what the upper held when it
resumed (calls had run since the interruption: a setuid file committed without
``--allow-special``), and a live writer could change an entry between the plan and its copy.
So each step carries its entry's *fingerprint* as planned (the journal keeps it), and the
executor copies only an entry whose fingerprint is still that one, read from the very
descriptor it copies from, again after the copy:

* a file, symlink, fifo or socket: its identity, type and mode, owner, size, mtime and ctime.
  The ctime moves on every change a process can make (a write, a truncate, chmod, chown, an
  xattr, a link; a write through a mapping when it dirties a page), and nothing can set it;
* a directory: its identity, mode and owner and its content xattrs (its times move when the
  commit itself removes its copied entries from the upper);
* a new tree committed whole: the sum of its entries' fingerprints, each with its relative
  path (a sum: the order the copy meets them in does not matter).

A fresh commit that finds an entry changed reports it and leaves it pending; a resumed one
leaves it to the same commit's fresh plan, which judges it again.
"""

from __future__ import annotations

import os
import stat

from manager.changes.meta import content_xattrs
from manager.commit.safefs import DIR_FLAGS
from manager.fs import longpath

_SUM_MOD = 1 << 128

CHANGED = ("changed in the sandbox after this commit judged it; nothing of it was written "
           "(review again, then commit)")


class Unjudged(OSError):
    """The upper entry is not the one the plan judged: not copied."""

    def __init__(self, path: str, why: str = CHANGED) -> None:
        super().__init__(0, why, path)


def entry(st: os.stat_result) -> str:
    """The fingerprint of a file, symlink, fifo or socket."""
    return f"{owned(st)}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def copied(real: os.stat_result | None, fingerprint: str) -> bool:
    """Whether ``real`` is a copy of the entry ``fingerprint`` describes, as a step makes it:
    the same type and mode and size, and the same mtime where the copy sets it (a file, a
    symlink)."""
    fields = fingerprint.split(":")
    if real is None or len(fields) != 8:
        return False
    mode, size, mtime = int(fields[2], 8), int(fields[5]), int(fields[6])
    same = real.st_mode == mode and real.st_size == size
    return same and (real.st_mtime_ns == mtime or not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)))


def owned(st: os.stat_result) -> str:
    """Identity, type and mode, owner: the head of a directory's fingerprint."""
    return f"{st.st_dev}:{st.st_ino}:{st.st_mode:o}:{st.st_uid}:{st.st_gid}"


def directory_at(dir_fd: int | None, name: str) -> str:
    """The fingerprint of directory ``name`` in ``dir_fd`` (None: the working directory);
    one its owner made unreadable has its xattrs unread, as commit then copies none."""
    try:
        fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return f"{owned(st)}:unread"
    try:
        st = os.fstat(fd)
        xattrs = sorted(content_xattrs(fd).items())
    finally:
        os.close(fd)
    return f"{owned(st)}:{_digest(repr(xattrs))}"


def of_upper(path: str) -> str:
    """The fingerprint of the upper entry at ``path`` (any length), as the plan finds it."""
    fd, rest = longpath.split(path)
    try:
        st = os.stat(rest, dir_fd=fd, follow_symlinks=False)
        return directory_at(fd, rest) if stat.S_ISDIR(st.st_mode) else entry(st)
    finally:
        if fd is not None:
            os.close(fd)


class TreeSum:
    """The fingerprint of a tree: its entries' (relative path, fingerprint), summed."""

    def __init__(self) -> None:
        self._total = 0

    def add(self, rel: str, st: os.stat_result) -> None:
        self._total = (self._total + int(_digest(f"{rel}\0{entry(st)}"), 16)) % _SUM_MOD

    @property
    def value(self) -> str:
        return f"tree:{self._total:032x}"


def require(judged: str | None, found: str, path: str, *, resumed: bool) -> None:
    """Raise :class:`Unjudged` unless ``found`` is what was judged. A step without a
    fingerprint (journaled by an older release) is judged by nothing: resumed, it is left
    to the fresh plan."""
    if judged is None:
        if resumed:
            raise Unjudged(path, "journaled without what was judged of it (an older release)")
        return
    if found != judged:
        raise Unjudged(path)


def same_while_read(before: os.stat_result, after: os.stat_result, path: str) -> None:
    """Raise :class:`Unjudged` when the entry changed between two looks at one descriptor
    (or at one name: then its identity too)."""
    if entry(before) != entry(after):
        raise Unjudged(path, "changed in the sandbox while this commit copied it; nothing of "
                             "it was written (review again, then commit)")


def _digest(text: str) -> str:
    from hashlib import blake2b

    return blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
