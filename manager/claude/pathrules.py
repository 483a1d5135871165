"""Path specifiers of ``Read(...)``/``Edit(...)`` permission rules, gitignore style.

Claude Code's forms: ``//abs/path`` (from the filesystem root), ``~/path`` (from
the home directory), ``/path`` (from the project root), ``path`` or ``./path``
(from the current directory). ``*`` and ``?`` stay within one path component,
``**`` crosses them; a pattern without a ``/`` matches a name at any depth; a
pattern that matches a directory covers everything below it.
"""

from __future__ import annotations

import os
import re

from manager.session.paths import is_within as _inside


def matches(pattern: str | None, path: str, project: str, cwd: str) -> bool:
    """Whether a rule's specifier (None: the bare tool name) covers ``path`` (absolute)."""
    if pattern is None or pattern in ("", "*", "**", "**/*"):
        return True
    anchored, base = _anchor(pattern, project, cwd)
    if base is None:
        return _under(path, anchored)
    if not _inside(path, base):
        return False
    rel = os.path.relpath(path, base)
    if "/" not in anchored.rstrip("/"):
        return any(_glob(anchored.rstrip("/"), name) for name in rel.split("/"))
    return _under(rel, anchored.lstrip("/"))


def _anchor(pattern: str, project: str, cwd: str) -> tuple[str, str | None]:
    """(pattern, base directory it is relative to; None when it is absolute)."""
    if pattern.startswith("//"):
        return pattern[1:], None
    if pattern.startswith("~/"):
        return os.path.join(os.path.expanduser("~"), pattern[2:]), None
    if pattern.startswith("/"):
        return os.path.join(project, pattern[1:]), None
    return pattern.removeprefix("./"), cwd


def _under(path: str, pattern: str) -> bool:
    """``pattern`` matches ``path`` or one of its parent directories."""
    pattern = pattern.rstrip("/") or "/"
    current = path
    while True:
        if _glob(pattern, current):
            return True
        parent = os.path.dirname(current)
        if parent == current or not parent:
            return False
        current = parent


def _glob(pattern: str, text: str) -> bool:
    return re.fullmatch(_regex(pattern), text, re.DOTALL) is not None


def _regex(pattern: str) -> str:
    out, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif c == "*":
            out, i = out + "[^/]*", i + 1
        elif c == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(c), i + 1
    return out
