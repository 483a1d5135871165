"""Commit part of a text file: the chosen hunks go to the real file, the rest stays pending.

The real file is replaced atomically (a new file beside it, renamed over it, with
its mode and owner), and only if it still holds what the hunks were computed
from. The sandbox's copy is left as it was, so the sandbox's view of the file does
not change; it is copied afresh (a new inode born after the real file's change)
so that the commit's conflict check does not take our own write for someone else's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path

from manager.changes.meta import mark_copy_up
from manager.changes.model import Change
from manager.commit.btime import AT_FDCWD
from manager.commit.btime import birth_ns
from manager.errors import WorkspaceError
from manager.fs.regular import linked_below
from manager.fs.regular import open_regular
from manager.fs.regular import read_regular


def still_shown(change: Change, expected: bytes) -> bool:
    """Whether the sandbox's file of ``change`` is still the ``expected`` bytes a question
    showed, reached through no symlink below its upper root: for where nothing runs in the
    sandbox (commit's apply), so what is checked is what is applied."""
    if linked_below(change.upper_root, change.upper_path):
        return False
    try:
        return read_regular(change.upper_path) == expected
    except OSError:
        return False


def holds(path: Path, expected: bytes) -> bool:
    """Whether ``path`` is a regular file of ``expected`` bytes (nothing else is opened)."""
    return read_regular(path) == expected


def write_real(path: Path, expected: bytes, content: bytes) -> None:
    """Replace ``path`` with ``content`` if it still holds ``expected``."""
    st = os.lstat(path)
    if not holds(path, expected):
        raise WorkspaceError(f"{path} changed while you chose hunks; nothing written to it",
                             hint="run `workspace commit -p` again")
    tmp = path.with_name(f".{path.name}.workspace-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fchmod(handle.fileno(), st.st_mode & 0o7777)
            if os.geteuid() == 0:
                os.fchown(handle.fileno(), st.st_uid, st.st_gid)
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def renew_upper(upper: Path, real: Path, tries: int = 200) -> None:
    """Copy the sandbox's file onto a new inode (same bytes, mode, times, xattrs) born
    strictly after the real file's last change: clocks are coarse, and a tie counts as
    a conflict, so wait out the tick."""
    for _ in range(tries):
        fresh = upper.with_name(f".{upper.name}.workspace-{os.getpid()}")
        _copy_regular(upper, fresh)
        mark_copy_up(str(fresh))  # its birth is the sandbox's new view (commit.plan)
        st = os.lstat(upper)
        if os.geteuid() == 0:
            os.chown(fresh, st.st_uid, st.st_gid, follow_symlinks=False)
        os.replace(fresh, upper)
        if birth_ns(AT_FDCWD, str(upper)) > os.lstat(real).st_ctime_ns:
            return
        time.sleep(0.002)


def _copy_regular(upper: Path, fresh: Path) -> None:
    """``upper``'s bytes and metadata in a new file ``fresh``: only a regular file is
    opened (never a device or fifo the sandbox put there, under either name)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(fresh)
    with open(open_regular(upper), "rb") as src:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with open(os.open(fresh, flags, 0o600), "wb") as dst:
            shutil.copyfileobj(src, dst)
    shutil.copystat(upper, fresh, follow_symlinks=False)
