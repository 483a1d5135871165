"""Real entries deleted outside while the sandbox held an entry of its own over them.

The evidence :mod:`manager.changes.seen` keeps from walks of the pending changes, taken here at
the moment of the deletion, so that no walk needs to come between: the holder's watch of the
real project (holder/watch.py) sees each name deleted or moved away there; when the upper
directory holds the sandbox's own entry at that name (anything but a whiteout; a directory,
merged or not: the real one its entries were made in went, moved away with what the sandbox
had replaced below it, or deleted), the pair (real path,
upper path as the CLI reaches it) is appended to ``deleted.real`` in the sandbox directory. The
CLI folds that file into its record when it next reads it, and commit takes such a name, now
without its real entry, as a conflict instead of bringing the file back as ``added``.

Stdlib only: the holder runs it with ``-I`` from its own directory.
"""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path

RECORD = "deleted.real"   # manager.changes.seen.HOLDER_RECORD
TRIES = 3


def note(upper: Path, host_upper: str, session_fd: int, gone: list[tuple[str, bool]]) -> None:
    """Record the names in ``gone`` ((real path, was a directory)) over which ``upper`` (the
    holder's path to the upper directory; ``host_upper``: the CLI's) holds an entry."""
    pairs = [(real, host_upper + real) for real, was_dir in gone
             if _held_over(str(upper) + real, was_dir)]
    if pairs:
        _append(session_fd, b"".join(os.fsencode(p) + b"\0" for pair in pairs for p in pair))


def _held_over(entry: str, was_dir: bool) -> bool:
    try:
        st = os.lstat(entry)
    except OSError:
        return False
    # A whiteout: the sandbox deleted it too. Anything else, a directory merged or not too
    # (the real one its entries were made in is gone).
    return not (stat.S_ISCHR(st.st_mode) and st.st_rdev == 0)


def _append(session_fd: int, data: bytes) -> None:
    """Append under an exclusive lock, to the file that still has the name: the CLI renames it
    away to read it (and locks it first), so a descriptor opened before that is stale."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(TRIES):
        try:
            fd = os.open(RECORD, flags, 0o644, dir_fd=session_fd)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            named = os.stat(RECORD, dir_fd=session_fd, follow_symlinks=False)
            if named.st_ino == os.fstat(fd).st_ino:
                os.write(fd, data)
                return
        except OSError:
            pass   # renamed away meanwhile (FileNotFoundError): open the new one
        finally:
            os.close(fd)
