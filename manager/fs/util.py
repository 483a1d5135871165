"""Small filesystem helpers: atomic writes, advisory locks, removing a tree the owner locked."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from pathlib import Path

from manager.errors import WorkspaceError

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs every command ~3 ms
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write via temp file + fsync + rename, so readers see old or new, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def write_json_atomic(path: Path, value: Any, *, indent: int | None = 2, sort_keys: bool = True,
                      mode: int = 0o644) -> None:
    """**The** writer of a JSON record: whole or not at all (:func:`write_atomic`).
    ``indent=None``: one compact line (records written on every call)."""
    import json

    separators = (",", ":") if indent is None else None
    text = json.dumps(value, indent=indent, sort_keys=sort_keys, separators=separators)
    write_atomic(path, (text + "\n").encode(), mode)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def locked(path: Path, shared: bool = False, timeout: float | None = None,
           what: str = "the session") -> Iterator[int]:
    """Hold an flock on ``path``; raise a clear error when ``timeout`` runs out."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        _acquire(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX, timeout, what)
        yield fd
    finally:
        os.close(fd)


def held(path: str | os.PathLike[str]) -> bool:
    """Whether a process holds a lock on ``path`` (one that locks it for its whole life:
    the kernel lets go when it dies). Nothing there, or nothing to open: False."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


def _acquire(fd: int, kind: int, timeout: float | None, what: str) -> None:
    if timeout is None:
        fcntl.flock(fd, kind)
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            raise WorkspaceError(
                f"{what} is busy: another workspace command or a sandboxed command holds its lock",
                hint="wait for the running command to finish (or stop it), then try again",
            )
        time.sleep(0.05)


def remove_tree(root: Path) -> None:
    """``rm -rf`` that opens up directories their owner made unreadable or read-only, at
    any depth (longpath.remove_tree).

    try copies the modes of ``/`` and its top-level directories into its sandbox
    (``/root`` is 0700, ``/proc`` 0555): as their owner we may change them, not read
    or write them as they are. Anything else that fails still raises.
    """
    from manager.fs import longpath

    if os.path.islink(root) or not os.path.isdir(root):
        os.unlink(root)
        return
    longpath.remove_tree(str(root))
