"""Which real entries a walk saw the sandbox's own entry stand over: the evidence that
a real file gone at commit was deleted outside, not one the sandbox created.

An entry the sandbox made itself (a file renamed over the path as editors and ``sed
-i`` save, a delete and recreate) carries no mark of the real file it replaced:
overlayfs sets its ``origin`` only on a copy-up. When the real file is then deleted
outside, the entry reads as ``added`` and commit would bring the file back. So every
walk of the pending changes (``workspace status``, ``diff``, ``commit -p``, the
guard rails' walk at a prompt and at the end of a turn) records the real paths over
which the sandbox held an entry of its own (a file, or a directory that hides the
real entry: opaque or of another type); commit takes such a path, now without its
real entry, as a conflict (:mod:`manager.commit.plan`).

Per name, not per directory: a directory whose names changed outside (an atomic save
of another file in it) says nothing about a name the sandbox created there. A name
leaves the record when a walk finds the sandbox's entry gone (a whiteout, or nothing:
committed, discarded, or deleted in the sandbox; a file it makes there later is its
own), and when commit applies it or discard drops it. A stale name can only report
a conflict that was none, never lose a deletion.

The overlay engine's holder adds the evidence without a walk: it sees each name deleted
or moved away in the real project as it happens and, when the sandbox held an entry of its
own there, appends the pair to ``sandbox/deleted.real`` (holder/gone.py), which is folded
into the record here at its next read. Elsewhere (the other engines, outside the project)
without a walk between the sandbox's write and the deletion outside there is no evidence
(no per-name mark exists to read), and the file comes back as ``added``
(docs/security.md). The record lives in the session's state directory, which
sandboxed commands cannot write and the agent's file tools are refused; one that
cannot be read is empty, one that cannot be written is skipped.
"""

from __future__ import annotations

import contextlib
import fcntl
import marshal
import os

from manager.changes.model import is_whiteout
from manager.fs import longpath

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.record
if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

RECORD = "seen.real"
FORMAT = 1
# The overlay holder's appends (holder/gone.py RECORD, in the session's sandbox directory):
# NUL-terminated real path, upper path, real path, ...
HOLDER_RECORD = os.path.join("sandbox", "deleted.real")


def load(session_dir: Path | str) -> dict[str, str]:
    """{real path: upper entry} as last recorded."""
    try:
        with open(os.path.join(session_dir, RECORD), "rb") as record:
            found = marshal.loads(record.read())
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if isinstance(found, tuple) and len(found) == 2 and found[0] == FORMAT \
            and isinstance(found[1], dict):
        return found[1]
    return {}


def current(session_dir: Path | str) -> dict[str, str]:
    """The record with the holder's appends folded in (and saved)."""
    names = load(session_dir)
    taken = _take_holder_record(session_dir)
    if taken.keys() - names.keys():
        names.update(taken)
        _save(session_dir, names)
    return names


def _take_holder_record(session_dir: Path | str) -> dict[str, str]:
    """The pairs the holder appended, whose sandbox entry still stands; its file is renamed
    away first (the holder then appends to a new one), and locked, so that an append under
    way ends before the read."""
    path = os.path.join(session_dir, HOLDER_RECORD)
    taken = f"{path}.{os.getpid()}.taken"
    try:
        os.rename(path, taken)
    except OSError:
        return {}
    try:
        fd = os.open(taken, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            data = b"".join(iter(lambda: os.read(fd, 1 << 16), b""))
        finally:
            os.close(fd)
    except OSError:
        return {}
    finally:
        with contextlib.suppress(OSError):
            os.unlink(taken)
    words = [os.fsdecode(w) for w in data.split(b"\0")[:-1]]
    pairs = zip(words[0::2], words[1::2], strict=False)   # a torn last pair: left out
    return {real: upper for real, upper in pairs if _stands(upper)}


def update(session_dir: Path | str, over_real: dict[str, str]) -> None:
    """A walk saw the sandbox's entries ``over_real`` stand over real ones: add them; keep
    the names recorded before while the sandbox's entry still stands (the real one may
    be gone since: that is the evidence)."""
    old = current(session_dir)
    new = dict(over_real)
    for real, upper in old.items():
        if real not in new and _stands(upper):
            new[real] = upper
    if new != old:
        _save(session_dir, new)


def forget(session_dir: Path | str, reals: Iterable[str] | None) -> None:
    """Committed or discarded (None: everything)."""
    if reals is None:
        for record in (RECORD, HOLDER_RECORD):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(session_dir, record))
        return
    old = current(session_dir)
    if old:
        gone = set(reals)
        new = {r: u for r, u in old.items() if r not in gone}
        if len(new) != len(old):
            _save(session_dir, new)


class Seen:
    """The record, read on the first question: most commits ask none."""

    __slots__ = ("session_dir", "_names")

    def __init__(self, session_dir: Path | str | None) -> None:
        self.session_dir = session_dir
        self._names: dict[str, str] | None = None

    def holds(self, real: str) -> bool:
        return real in self._loaded()

    def holds_below(self, real: str) -> bool:
        """A name below the directory ``real``: the directory gone, those went with it."""
        prefix = real.rstrip("/") + "/"
        return any(name.startswith(prefix) for name in self._loaded())

    def _loaded(self) -> dict[str, str]:
        if self._names is None:
            self._names = current(self.session_dir) if self.session_dir is not None else {}
        return self._names


def _stands(upper: str) -> bool:
    """The sandbox's entry is still there: not gone, not a whiteout."""
    try:
        st = longpath.lstat(upper)
    except OSError:
        return False
    return not is_whiteout(upper, st)


def _save(session_dir: Path | str, names: dict[str, str]) -> None:
    path = os.path.join(session_dir, RECORD)
    temporary = f"{path}.{os.getpid()}"
    try:
        with open(temporary, "wb") as out:
            out.write(marshal.dumps((FORMAT, names)))
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
