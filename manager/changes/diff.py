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
from dataclasses import dataclass
from pathlib import Path

from manager.changes import meta
from manager.changes.model import Change
from manager.changes.model import Kind

MAX_BYTES = 4 << 20   # larger files are summarised, not diffed
MAX_LINES = 2000      # per file, before the rest is elided
SNIFF = 8000          # bytes checked for NUL, as git does

_COLOURS = {"header": "\033[1m", "hunk": "\033[36m", "-": "\033[31m", "+": "\033[32m"}
_RESET = "\033[0m"


@dataclass(frozen=True)
class Side:
    """One side of a diff: what an entry holds, read without following symlinks."""

    label: str
    mode: int | None = None      # st_mode; None when absent
    data: bytes | None = None    # file bytes or ``-> target``; None for dirs or when too large
    size: int = 0

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


def diff_change(change: Change, project: Path, *, max_bytes: int = MAX_BYTES,
                max_lines: int = MAX_LINES) -> list[str]:
    a_label, b_label = labels(change, project)
    old = _side(change.path, a_label, max_bytes) if change.old_type else Side("/dev/null")
    new = Side("/dev/null") if change.kind is Kind.DELETED else _side(change.upper, b_label,
                                                                       max_bytes)
    head = [f"diff --git {a_label} {b_label}", *_meta_lines(change)]
    if change.kind is not Kind.REPLACED:
        return head + _body(old, new, max_lines)
    # A type change reads best as git shows it: the old entry deleted, the new one added.
    absent = Side("/dev/null")
    return head + _body(old, absent, max_lines) + head + _body(absent, new, max_lines)


def _meta_lines(change: Change) -> list[str]:
    """What the bytes do not show: powers the entry grants, extended attributes."""
    lines = [f"special: {why} (commit needs --allow-special)" for why in change.special]
    if change.owner is not None:
        lines.append(f"owner: {change.owner[0]}:{change.owner[1]} (uid:gid inside the sandbox)")
    if change.kind is Kind.DELETED:
        return lines
    try:
        old = meta.content_xattrs(str(change.path)) if change.old_type else {}
        new = meta.content_xattrs(str(change.upper))
    except OSError as exc:
        return [*lines, f"extended attributes unreadable: {exc.strerror}"]
    for name in sorted(old.keys() | new.keys()):
        if name not in new:
            lines.append(f"xattr removed: {name}")
        elif name not in old:
            lines.append(f"xattr added: {name}={_shown(new[name])}")
        elif old[name] != new[name]:
            lines.append(f"xattr changed: {name}: {_shown(old[name])} -> {_shown(new[name])}")
    return lines


def _shown(value: bytes) -> str:
    text = repr(value)[2:-1]
    return text if len(text) <= 80 else text[:77] + "..."


def labels(change: Change, project: Path) -> tuple[str, str]:
    if change.in_project:
        rel = change.path.relative_to(project).as_posix()
        return f"a/{rel}", f"b/{rel}"
    return str(change.path), str(change.path)


def _side(path: Path, label: str, max_bytes: int) -> Side:
    try:
        st = os.lstat(path)
    except OSError:
        return Side("/dev/null")
    if stat.S_ISLNK(st.st_mode):
        return Side(label, st.st_mode, f"-> {os.readlink(path)}\n".encode(), st.st_size)
    if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
        return Side(label, st.st_mode, None, st.st_size)
    return Side(label, st.st_mode, _read_nofollow(path), st.st_size)


def _read_nofollow(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


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
    return side.data is not None and b"\0" in side.data[:SNIFF]


def _text_diff(old: Side, new: Side, max_lines: int) -> list[str]:
    a = _text_lines(old.data)
    b = _text_lines(new.data)
    out = list(difflib.unified_diff(a, b, old.label, new.label, lineterm=""))
    if len(out) > max_lines:
        out = out[:max_lines] + [f"... {len(out) - max_lines} more diff lines not shown"]
    return out


def _text_lines(data: bytes | None) -> list[str]:
    if not data:
        return []
    return data.decode("utf-8", errors="replace").splitlines()


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
