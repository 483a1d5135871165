"""Lines added and removed by pending changes, as ``git diff --numstat`` counts them."""

from __future__ import annotations

import os
import stat

from manager.changes.model import Change
from manager.changes.model import Kind
from manager.changes.sniff import looks_binary
from manager.fs.regular import read_regular
from manager.record import Value

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.record
if TYPE_CHECKING:
    from typing import Final

MAX_BYTES = 1 << 20     # larger files are not counted (git --stat calls them "Bin" too)


class Count(Value):
    __slots__ = ("added", "removed", "binary")
    added: Final[int]
    removed: Final[int]
    binary: Final[bool]

    def __init__(self, added: int, removed: int, binary: bool = False) -> None:
        self.added = added
        self.removed = removed
        self.binary = binary


def count(change: Change) -> Count:
    """Lines added and removed by one change (files only; directories count as 0)."""
    old = _lines(change.real_path) if change.old_type and change.kind is not Kind.ADDED \
        else []
    new = [] if change.kind is Kind.DELETED else _lines(change.upper_path)
    if old is None or new is None:
        return Count(0, 0, binary=True)
    if not old or not new:
        return Count(len(new), len(old))
    import difflib  # only when lines are counted: not on status's path at 100,000 files

    added = removed = 0
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    return Count(added, removed)


def count_new_tree(top: str) -> Count:
    """Lines of every text file below the new directory ``top``: all added. A loop (os.walk
    recurses), listing through names of any length: the agent may nest thousands deep."""
    from manager.fs import longpath

    added, todo = 0, [top]
    while todo:
        directory = todo.pop()
        try:
            with longpath.reach(directory) as reachable, os.scandir(reachable) as entries:
                found = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        except OSError:
            continue
        for name, is_dir in found:
            path = os.path.join(directory, name)
            if is_dir:
                todo.append(path)
            else:
                added += len(_lines(path) or [])
    return Count(added, 0)


def _lines(long: str) -> list[bytes] | None:
    """The file's lines; [] for no file or a directory; None when binary or too large."""
    from manager.fs import longpath

    try:
        with longpath.reach(long) as path:
            return _read_lines(path)
    except OSError:
        return []


def _read_lines(path: str) -> list[bytes] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return []
    if stat.S_ISLNK(st.st_mode):
        return [os.fsencode(os.readlink(path))]
    if not stat.S_ISREG(st.st_mode):
        return []
    if st.st_size > MAX_BYTES:
        return None
    try:
        data = read_regular(path)   # swapped for a device since the lstat: not opened
    except OSError:
        return []
    if looks_binary(data):
        return None
    return data.splitlines()
