"""What commit applies is what review showed: writes no call made after the last review.

The container engines keep a call's background processes running (by design), so one
can change the sandbox after ``workspace diff`` and before ``workspace commit``. Commit
stops the sandbox before it reads anything (the engine's ``release``: the container is
removed, nothing runs during the commit); what is left is the interval before. Each
review (status, diff) stamps the moment it began; the host-side call records directory
(``running/``, written at every call's start and end) says when the last call ended.
An upper entry changed after both was written by a process no call was running, and no
review can have shown it: commit refuses (nothing applied) until the user reviews again.

Overlay and try keep nothing running between calls (the overlay holder ends a finished
call's orphans; try's pid namespace dies with the call), so they have no such writes and
no ``running/`` directory. In volume mode the upper comes out of the engine's volume at
commit, with the export's ctimes, so the check cannot read when an entry changed there.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from manager.changes.model import Layer
from manager.changes.model import is_whiteout
from manager.changes.model import read_changes
from manager.fs import longpath
from manager.session.store import Session

STAMP = "reviewed"       # in the sandbox directory: its mtime is when the last review began
CALLS = "running"        # the container engines' host-side call records


def mark(session: Session) -> None:
    """A review begins: stamp it with the file system's clock, which stamps the upper's
    entries too (the coarse clock lags ``time.time()``)."""
    if (session.sandbox / CALLS).is_dir():   # only where a process can outlive its call
        with contextlib.suppress(OSError):    # never a reason for review to fail
            (session.sandbox / STAMP).touch()
            os.utime(session.sandbox / STAMP)


def since(session: Session) -> int | None:
    """After when an upper entry is a write that no call made and no review can have shown;
    None when nothing can write between calls. Read before the engine is released (that
    may tidy ``running/``)."""
    calls = session.sandbox / CALLS
    try:
        if _in_volume(session):
            return None
        ended = os.stat(calls).st_mtime_ns
    except FileNotFoundError:
        return None
    from manager.engines.container.upper import EXPORTED  # the export's writes are ours

    stamps = [ended]
    for name in (STAMP, EXPORTED):
        with contextlib.suppress(FileNotFoundError):
            stamps.append(os.stat(session.sandbox / name).st_mtime_ns)
    return max(stamps)


def unreviewed(layers: list[Layer], project: Path, after: int) -> list[Path]:
    """The changed paths whose upper entry changed after ``after``."""
    late = []
    for change in read_changes(layers, project):
        try:
            ctime = _changed(change.upper_path)
        except FileNotFoundError:
            continue
        if ctime > after:
            late.append(change.path)
    return late


def _changed(upper: str) -> int:
    """When the upper entry last changed. A whiteout overlayfs hard-linked to its shared
    one (all of a mount's whiteouts are one inode, cached in the work dir) takes its
    directory's ctime: the shared inode's moves with every whiteout made anywhere, and when
    the engine clears the work dir at release (a late "change" on every deletion)."""
    st = longpath.lstat(upper)
    if st.st_nlink > 1 and is_whiteout(upper, st):
        return longpath.lstat(os.path.dirname(upper)).st_ctime_ns
    return st.st_ctime_ns


def _in_volume(session: Session) -> bool:
    from manager.engines.container.upper import VOLUME_MARK

    return (session.sandbox / VOLUME_MARK).exists()
