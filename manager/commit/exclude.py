"""The ``exclude`` setting: gitignore-like globs naming paths that are never committed.

A pattern starting with ``/`` (or ``~/``) is absolute; one with a ``/`` elsewhere
is anchored at the project root; one without a ``/`` matches a name at any
depth. ``*`` and ``?`` stay within one component, ``**`` spans any number.
A pattern that matches a directory excludes everything below it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path


class Literal(str):
    """An absolute path excluded as it is spelled, never read as a pattern: what workspace
    keeps out itself (its state, what ``hide`` names, git's internals) may hold ``[``,
    ``*``, ``?``, spaces (``app/[slug]``: read as a glob it named other paths, and what
    review left out was committed, attack pass 21)."""

    __slots__ = ()


@dataclass(frozen=True)
class Excluder:
    project: Path
    absolute: tuple[re.Pattern[str], ...]
    relative: tuple[re.Pattern[str], ...]
    # What every path a pattern matches starts with (its text before the first glob
    # character, made absolute): a tree none of them reaches needs no look at its entries.
    prefixes: tuple[str, ...] = ()

    # Verdicts by path: a change's ancestors are mostly other changes' (a chain of 3,000
    # new directories would otherwise match 3,000 ancestors each).
    seen: dict[str, bool] = field(default_factory=dict, compare=False)

    def __call__(self, path: Path | str) -> bool:
        """True when ``path`` or one of its ancestors matches a pattern."""
        if not self.absolute and not self.relative:
            return False
        text = str(path)
        climbed = []
        verdict = False
        while text not in self.seen:
            climbed.append(text)
            if self._matches(text):
                verdict = True
                break
            parent = os.path.dirname(text)
            if parent == text:
                break
            text = parent
        else:
            verdict = self.seen[text]
        for done in climbed:
            self.seen[done] = verdict
        return verdict

    def reaches(self, root: str) -> bool:
        """Whether a pattern may match a path below ``root`` (False: none can)."""
        below = root.rstrip("/") + "/"
        return any(p.startswith(below) or below.startswith(p) for p in self.prefixes)

    def _matches(self, text: str) -> bool:
        """``text`` itself (not its ancestors) matches a pattern."""
        if any(rx.fullmatch(text) for rx in self.absolute):
            return True
        top = str(self.project)
        if not text.startswith(top + "/"):
            return False
        rel = text[len(top) + 1:]
        return any(rx.fullmatch(rel) for rx in self.relative)


def compile_patterns(patterns: Iterable[str], project: Path) -> Excluder:
    absolute: list[re.Pattern[str]] = []
    relative: list[re.Pattern[str]] = []
    prefixes: list[str] = []
    top = str(project).rstrip("/") + "/"
    for raw in patterns:
        if isinstance(raw, Literal):
            path = raw.rstrip("/") or "/"
            absolute.append(re.compile(re.escape(path)))
            prefixes.append(path)
            continue
        pattern = os.path.expanduser(raw.strip()).rstrip("/")
        if not pattern:
            continue
        if pattern.startswith("/"):
            absolute.append(re.compile(_glob_regex(pattern)))
            prefixes.append(_literal(pattern))
        elif "/" in pattern:
            relative.append(re.compile(_glob_regex(pattern)))
            prefixes.append(top + _literal(pattern))
        else:
            relative.append(re.compile("(?:.*/)?" + _glob_regex(pattern)))
            prefixes.append(top)      # a name: anywhere in the project
    return Excluder(project, tuple(absolute), tuple(relative), tuple(prefixes))


def _literal(pattern: str) -> str:
    """``pattern`` up to its first glob character."""
    cut = min((i for i in (pattern.find(c) for c in "*?[") if i != -1), default=len(pattern))
    return pattern[:cut]


def _glob_regex(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        token, i = _glob_token(pattern, i)
        out.append(token)
    return "".join(out)


def _glob_token(pattern: str, i: int) -> tuple[str, int]:
    if pattern.startswith("**/", i):
        return "(?:.*/)?", i + 3
    if pattern.startswith("**", i):
        return ".*", i + 2
    char = pattern[i]
    if char == "*":
        return "[^/]*", i + 1
    if char == "?":
        return "[^/]", i + 1
    if char == "[":
        end = pattern.find("]", i + 2)
        if end != -1:
            body = pattern[i + 1:end].replace("\\", "\\\\")
            return "[" + ("^" + body[1:] if body.startswith("!") else body) + "]", end + 1
    return re.escape(char), i + 1
