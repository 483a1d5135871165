"""Glob expansion with a budget: entries visited and time.

``hide`` patterns come from files the agent may write (an untrusted project file adds to
the list): ``/**/id_*`` made the next sandbox start walk the whole file system. This walk
counts every directory entry it reads and the time it takes, and raises
:class:`OverBudget` past either, instead of stalling. Semantics are ``glob.glob``'s with
``recursive=True, include_hidden=True`` (``**`` is zero or more directories; a final
``**`` every entry below), except that a directory is entered once (a symlink loop ends).
"""

from __future__ import annotations

import fnmatch
import os
import time

MAGIC = frozenset("*?[")


class OverBudget(Exception):
    """The walk read more entries, or took longer, than allowed."""


class Budget:
    __slots__ = ("entries", "deadline")

    def __init__(self, entries: int, seconds: float) -> None:
        self.entries = entries
        self.deadline = time.monotonic() + seconds

    def spend(self, count: int = 1) -> None:
        self.entries -= count
        if self.entries < 0 or time.monotonic() > self.deadline:
            raise OverBudget


def expand(pattern: str, budget: Budget) -> list[str]:
    """The existing paths an absolute, normalised ``pattern`` names."""
    current = ["/"]
    parts = [p for p in pattern.split("/") if p]
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            current = [p for base in current for p in _below(base, budget, files=last)]
        elif MAGIC & set(part):
            current = [os.path.join(base, name) for base in current
                       for name, _dir in _names(base, budget) if fnmatch.fnmatchcase(name, part)]
        else:
            current = [os.path.join(base, part) for base in current]
            current = [p for p in current if os.path.lexists(p) and (last or os.path.isdir(p))]
    return current


def _names(directory: str, budget: Budget) -> list[tuple[str, bool]]:
    """Each entry's name, and whether it is a directory (a symlink to one too)."""
    try:
        with os.scandir(directory) as entries:
            names = []
            for entry in entries:
                budget.spend()
                try:
                    is_dir = entry.is_dir()
                except OSError:
                    is_dir = False
                names.append((entry.name, is_dir))
            return names
    except OSError:
        return []


def _below(base: str, budget: Budget, files: bool) -> list[str]:
    """``base`` and every directory below it (every entry when ``files``), each once."""
    found, stack, seen = [base], [base], set()
    while stack:
        directory = stack.pop()
        try:
            st = os.stat(directory)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        for name, is_dir in _names(directory, budget):
            path = os.path.join(directory, name)
            if is_dir:
                stack.append(path)
            if is_dir or files:
                found.append(path)
    return found
