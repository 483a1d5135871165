"""Unified diffs of pending changes against the real files, git-style.

Project files are labelled ``a/<rel>`` and ``b/<rel>``; files elsewhere keep
their absolute path. Symlinks diff as a one-line ``-> target``; binary and
oversized files are summarised; directories get a one-line summary.
"""

from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Iterable
from collections.abc import Iterator
from pathlib import Path

from manager.changes import meta
from manager.changes.model import Change
from manager.changes.model import Kind
from manager.changes.sniff import looks_binary
from manager.fs import longpath
from manager.fs.regular import open_regular
from manager.record import Value

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.record
if TYPE_CHECKING:
    from typing import Final

MAX_BYTES = 4 << 20   # larger files are summarised, not diffed
MAX_LINES = 2000      # per file, before the rest is elided

_COLOURS = {"header": "\033[1m", "hunk": "\033[36m", "-": "\033[31m", "+": "\033[32m"}
_RESET = "\033[0m"


class Side(Value):
    """One side of a diff: what an entry holds, read without following symlinks."""

    __slots__ = ("label", "mode", "data", "size")
    label: Final[str]
    mode: Final[int | None]      # st_mode; None when absent
    data: Final[bytes | None]    # file bytes or ``-> target``; None for dirs or when too large
    size: Final[int]

    def __init__(self, label: str, mode: int | None = None, data: bytes | None = None,
                 size: int = 0) -> None:
        self.label = label
        self.mode = mode
        self.data = data
        self.size = size

    @property
    def is_dir(self) -> bool:
        return self.mode is not None and stat.S_ISDIR(self.mode)


def render(changes: Iterable[Change], project: Path, *, color: bool = False,
           max_bytes: int = MAX_BYTES, max_lines: int = MAX_LINES) -> str:
    """The whole diff as one string (empty when nothing differs)."""
    lines: list[str] = []
    for change in changes:
        lines.extend(diff_change(change, project, max_bytes=max_bytes, max_lines=max_lines))
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return colourise(text) if color else text


def stream(changes: Iterable[Change], project: Path, *, color: bool = False) -> Iterator[str]:
    """The lines of :func:`render`'s text (as ``splitlines`` cuts them), one change at a
    time: a diff of thousands of files is never held whole."""
    for change in changes:
        text = "".join(line if line.endswith("\n") else line + "\n"
                       for line in diff_change(change, project))
        yield from (colourise(text) if color else text).splitlines()


def diff_change(change: Change, project: Path, *, max_bytes: int = MAX_BYTES,
                max_lines: int = MAX_LINES) -> list[str]:
    a_label, b_label = labels(change, project)
    # Read through names any call takes: the agent's paths may be longer than PATH_MAX.
    with longpath.reach(change.real_path) as real, longpath.reach(change.upper_path) as upper:
        old = _side(real, a_label, max_bytes) if change.old_type else Side("/dev/null")
        new = Side("/dev/null") if change.kind is Kind.DELETED \
            else _side(upper, b_label, max_bytes)
        head = [f"diff --git {a_label} {b_label}", *_meta_lines(change, real, upper)]
    if change.kind is not Kind.REPLACED:
        return head + _body(old, new, max_lines)
    # A type change reads best as git shows it: the old entry deleted, the new one added.
    absent = Side("/dev/null")
    return head + _body(old, absent, max_lines) + head + _body(absent, new, max_lines)


def _meta_lines(change: Change, real: str, upper: str) -> list[str]:
    """What the bytes do not show: powers the entry grants, extended attributes."""
    lines = [f"special: {why} (commit needs --allow-special)" for why in change.special]
    if change.owner is not None:
        lines.append(f"owner: {change.owner[0]}:{change.owner[1]} (uid:gid inside the sandbox)")
    if change.kind is Kind.DELETED:
        return lines
    try:
        old = meta.content_xattrs(real) if change.old_type else {}
        new = meta.content_xattrs(upper)
    except OSError as exc:
        return [*lines, f"extended attributes unreadable: {exc.strerror}"]
    from manager.ui import quote

    for name in sorted(old.keys() | new.keys()):
        if name not in new:
            lines.append(f"xattr removed: {quote(name)}")
        elif name not in old:
            lines.append(f"xattr added: {quote(name)}={_shown(new[name])}")
        elif old[name] != new[name]:
            lines.append(f"xattr changed: {quote(name)}: {_shown(old[name])} -> {_shown(new[name])}")
    return lines


def _shown(value: bytes) -> str:
    text = repr(value)[2:-1]
    return text if len(text) <= 80 else text[:77] + "..."


def labels(change: Change, project: Path) -> tuple[str, str]:
    """The two sides' names, quoted as git quotes them (``"a/zz\\r"``)."""
    from manager.ui import quote

    if change.in_project:
        rel = change.real_path[len(str(project)):].lstrip("/") or "."
        return quote(f"a/{rel}"), quote(f"b/{rel}")
    return quote(change.real_path), quote(change.real_path)


def _side(path: str, label: str, max_bytes: int) -> Side:
    try:
        st = os.lstat(path)
    except OSError:
        return Side("/dev/null")
    if stat.S_ISLNK(st.st_mode):
        return Side(label, st.st_mode, f"-> {os.readlink(path)}\n".encode(), st.st_size)
    if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
        return Side(label, st.st_mode, None, st.st_size)
    return Side(label, st.st_mode, _read_nofollow(path, st.st_size, max_bytes), st.st_size)


def _read_nofollow(path: str, size: int, limit: int) -> bytes | None:
    """The file's bytes (``size``: what lstat said, a hint; the file may have changed);
    None once past ``limit`` (a file a call keeps growing must not keep diff reading)."""
    fd = open_regular(path)   # swapped for a device since the lstat: not opened
    try:
        want = size + 1
        chunks = [os.read(fd, want)]
        total = len(chunks[0])
        # A short read of a regular file is its end: no second read to see an empty one
        # (10,000 fewer calls for a 5,000-file diff). One that grew is read to its end.
        while len(chunks[-1]) == want:
            if total > limit:
                return None
            want = max(size, 1 << 16)
            chunks.append(os.read(fd, want))
            total += len(chunks[-1])
        return b"".join(chunks) if total <= limit else None
    finally:
        os.close(fd)


def _body(old: Side, new: Side, max_lines: int) -> list[str]:
    lines = _mode_lines(old, new)
    if old.is_dir or new.is_dir:
        return lines + _dir_summary(old, new)
    specials = [f"{side.label}: {meta.type_name(side.mode)}" for side in (old, new)
                if side.mode is not None and meta.type_name(side.mode)]
    if specials:
        return lines + [f"Special file ({'; '.join(specials)})"]
    if old.mode is not None and new.mode is not None and old.data == new.data and \
            old.data is not None:
        return lines
    if _binary(old) or _binary(new):
        return lines + [f"Binary files differ ({old.size} bytes -> {new.size} bytes)"]
    if (old.mode is not None and old.data is None) or (new.mode is not None and new.data is None):
        return lines + [f"Large files differ ({old.size} bytes -> {new.size} bytes); not shown"]
    return lines + _text_diff(old, new, max_lines)


def _mode_lines(old: Side, new: Side) -> list[str]:
    if old.mode is None and new.mode is not None:
        return [f"new {_noun(new)} mode {new.mode:06o}"]
    if new.mode is None and old.mode is not None:
        return [f"deleted {_noun(old)} mode {old.mode:06o}"]
    if old.mode is not None and new.mode is not None and old.mode != new.mode:
        return [f"old mode {old.mode:06o}", f"new mode {new.mode:06o}"]
    return []


def _noun(side: Side) -> str:
    return "directory" if side.is_dir else "file"


def _dir_summary(old: Side, new: Side) -> list[str]:
    if new.mode is None:
        return [f"Directory {old.label} deleted with everything in it"]
    if old.mode is None:
        return [f"Directory {new.label} added"]
    return []


def _binary(side: Side) -> bool:
    return side.data is not None and looks_binary(side.data)


def _text_diff(old: Side, new: Side, max_lines: int) -> list[str]:
    a = _text_lines(old.data)
    b = _text_lines(new.data)
    out = _grown(a, b, old.label, new.label)
    if out is None:
        out = list(difflib.unified_diff(a, b, old.label, new.label, lineterm=""))
    if len(out) > max_lines:
        out = out[:max_lines] + [f"... {len(out) - max_lines} more diff lines not shown"]
    # Compared raw (escaping could make two different lines look alike), shown escaped.
    from manager.ui import shown

    return [shown(line) for line in out]


def _grown(a: list[str], b: list[str], a_label: str, b_label: str) -> list[str] | None:
    """``difflib.unified_diff``'s lines when one side is the other plus lines at its end
    (the commonest edit), without its matcher; None for any other case.

    The same lines, by difflib's own rules: the longest matching block comes first, ties
    going to the earliest in ``a`` then in ``b``, so the whole shorter side matches at
    (0, 0); nothing is left to match after it. Below 200 lines in ``b`` difflib's
    "popular line" heuristic (autojunk) is off, so it cannot change that.
    """
    short, grew = (a, True) if len(a) < len(b) else (b, False)
    long_ = b if grew else a
    if not short or len(b) >= 200 or len(short) == len(long_) or long_[:len(short)] != short:
        return None
    n = len(short)
    start = max(0, n - 3)
    old_end, new_end = (n, len(b)) if grew else (len(a), n)
    out = [f"--- {a_label}", f"+++ {b_label}",
           f"@@ -{_range(start, old_end)} +{_range(start, new_end)} @@"]
    out.extend(" " + line for line in short[start:])
    mark = "+" if grew else "-"
    out.extend(mark + line for line in long_[n:])
    return out


def _range(start: int, stop: int) -> str:
    """A hunk's range as difflib writes it (``_format_range_unified``)."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _text_lines(data: bytes | None) -> list[str]:
    """Lines as git cuts them: at "\\n" only (a "\\r" or form feed inside a line is shown
    there, escaped, not as a line break the file does not have); CRLF endings dropped."""
    if not data:
        return []
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if not lines[-1]:
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def colourise(text: str) -> str:
    return "".join(_colour_line(line) for line in text.splitlines(keepends=True))


def _colour_line(line: str) -> str:
    body = line.rstrip("\n")
    end = line[len(body):]
    for key, prefixes in (("header", ("diff ", "--- ", "+++ ")), ("hunk", ("@@",)),
                          ("-", ("-",)), ("+", ("+",))):
        if body.startswith(prefixes):
            return f"{_COLOURS[key]}{body}{_RESET}{end}"
    return line
