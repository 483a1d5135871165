"""Pending changes grouped for a person: what git status would show, at any size.

A new directory is one entry with its file count (as git shows an untracked
directory); what the project's ignore rules ignore is set apart; changes under
``.git`` are read as git history (:mod:`manager.review.gitview`), not files;
what lies outside the project is grouped by where it lives (``~/.cache``,
``/tmp``...). Nothing is dropped: every change belongs to exactly one entry.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

from manager.changes.model import Change
from manager.changes.model import EntryType
from manager.changes.model import holds_its_contents
from manager.changes.model import is_within
from manager.git import plumbing
from manager.record import Record

# Roots whose second level says more than the first (/usr/local, /var/lib...).
DEEP_ROOTS = frozenset({"usr", "var", "opt", "srv"})


class Entry(Record):
    """One line of review: a change, and everything it stands for when collapsed."""

    __slots__ = ("change", "members")

    def __init__(self, change: Change, members: list[Change] | None = None) -> None:
        self.change = change
        self.members = members if members is not None else []   # the change itself first

    @property
    def files(self) -> int:
        if self.change.below is not None:
            return self.change.below
        return sum(1 for c in self.members if (c.new_type or c.old_type) is not EntryType.DIR) \
            or (0 if self.is_dir else 1)

    @property
    def is_dir(self) -> bool:
        return (self.change.new_type or self.change.old_type) is EntryType.DIR

    @property
    def collapsed(self) -> bool:
        return len(self.members) > 1 or self.change.below is not None


class Groups(Record):
    __slots__ = ("project", "ignored", "git", "elsewhere")

    def __init__(self, project: list[Entry] | None = None,
                 ignored: dict[str, list[Entry]] | None = None, git: list[Change] | None = None,
                 elsewhere: dict[str, list[Entry]] | None = None) -> None:
        self.project = project if project is not None else []
        self.ignored = ignored if ignored is not None else {}   # by topmost ignored dir
        self.git = git if git is not None else []               # changes under .git
        self.elsewhere = elsewhere if elsewhere is not None else {}

    @property
    def ignored_files(self) -> int:
        return sum(e.files for entries in self.ignored.values() for e in entries)

    @property
    def elsewhere_files(self) -> int:
        return sum(e.files for entries in self.elsewhere.values() for e in entries)


def group(changes: list[Change], project: Path, *, expand: bool = False,
          home: Path | None = None, ignores: IgnoreQuery | None = None) -> Groups:
    """Sort ``changes`` (parents before children) into review groups.

    ``expand`` lists every change on its own line (``--all`` or named paths).
    ``ignores``: the project's query, already asked about the changes as they were found.
    """
    result = Groups()
    git_dir = str(project / ".git")
    in_project: list[Change] = []
    outside: list[Change] = []
    for change in changes:
        if is_within(change.real_path, git_dir):
            result.git.append(change)
        elif change.in_project:
            in_project.append(change)
        else:
            outside.append(change)
    entries = _collapse(in_project, expand)
    tops = _ignored_tops(project, entries, ignores or IgnoreQuery(project))
    for entry in entries:
        top = tops.get(entry.change.real_path)
        if top is None:
            result.project.append(entry)
            continue
        label = top[len(str(project)) + 1:] + "/" if top != entry.change.real_path \
            else display_rel(entry, project)
        result.ignored.setdefault(label, []).append(entry)
    home = home or Path(os.path.expanduser("~"))
    for entry in _collapse(outside, expand):
        result.elsewhere.setdefault(root_label(entry.change.path, home), []).append(entry)
    return result


def _collapse(changes: list[Change], expand: bool) -> list[Entry]:
    """One entry per change; below a new (or replaced) directory, one for all of it."""
    entries: list[Entry] = []
    root: Entry | None = None
    for change in changes:
        if root is not None and is_within(change.real_path, root.change.real_path):
            root.members.append(change)
            continue
        entry = Entry(change, [change])
        entries.append(entry)
        root = entry if not expand and holds_its_contents(change) else None
    return entries


def root_label(path: Path, home: Path) -> str:
    """Where an outside change lives, for grouping: ``~/.cache``, ``/tmp``, ``/usr/local``."""
    if is_within(path, home):
        rel = path.relative_to(home).parts
        return "~/" + rel[0] if rel else "~"
    parts = path.parts[1:]
    if not parts:
        return "/"
    depth = 2 if parts[0] in DEEP_ROOTS and len(parts) > 2 else 1
    return "/" + "/".join(parts[:depth])


def display_rel(entry: Entry, project: Path) -> str:
    rel = str(entry.change.path.relative_to(project))
    return rel + "/" if entry.is_dir else rel


def _ignored_tops(project: Path, entries: list[Entry], ignores: IgnoreQuery) -> dict[str, str]:
    """The ignored entries' paths, each with its topmost ancestor directory that is
    ignored itself (``.venv`` for every file below it), else with the path itself.
    The entries and their ancestors are asked of git in one go."""
    for entry in entries:
        ignores.ask(entry.change)
    ignored = ignores.answer()
    if not ignored:
        return {}
    ignored_dirs = sorted((a for a in ignores.ancestors if a in ignored), key=len)
    result: dict[str, str] = {}
    for entry in entries:
        path = entry.change.real_path
        if path in ignored:
            result[path] = next((a for a in ignored_dirs if is_within(path, a)), path)
    return result


class IgnoreQuery:
    """Which changed paths (and their ancestor directories, absolute, in the project) the
    project's own ignore rules ignore: git's, in a git project.

    The real repository's rules decide, not the sandbox's: an agent cannot hide a change
    by editing ``.gitignore`` in the sandbox. Tracked files are never ignored, as in git.
    One ``git check-ignore`` for all paths, started before the walk and asked as changes
    are found (:func:`manager.changes.model.read_changes`'s ``on_found``): git looks each
    path up on another core while the walk goes on.
    """

    def __init__(self, project: Path) -> None:
        self.top = str(project)
        self.git_dir = str(project / ".git")
        self.asked: dict[str, bytes] = {}     # absolute path -> what git was asked
        self.ancestors: set[str] = set()
        self._proc: subprocess.Popen[bytes] | None = None
        self._output: list[bytes] = []
        self._reader: threading.Thread | None = None
        if os.path.exists(self.git_dir):
            self._start(project)

    def _start(self, project: Path) -> None:
        # --no-index: check-ignore consults the index per path otherwise, seconds for
        # thousands; tracked files (never ignored, as in git) are taken out at the end.
        try:
            self._proc = plumbing.start_in(project, "check-ignore", "--no-index", "--stdin", "-z")
        except OSError:
            return
        stdout = self._proc.stdout
        assert stdout is not None
        # Read while writing: git answers as it reads, and a full pipe would stall both.
        self._reader = threading.Thread(target=lambda: self._output.append(stdout.read()),
                                        daemon=True)
        self._reader.start()

    def ask(self, change: Change) -> None:
        """Ask about ``change`` and its ancestors below the project (once each)."""
        path = change.real_path
        if self._proc is None or path in self.asked or not change.in_project \
                or path == self.top or is_within(path, self.git_dir):
            return
        is_dir = (change.new_type or change.old_type) is EntryType.DIR
        self._send(path, is_dir)
        parent = path.rpartition("/")[0]
        while parent not in self.ancestors and parent != self.top and is_within(parent, self.top):
            self.ancestors.add(parent)
            if parent not in self.asked:
                self._send(parent, True)
            parent = parent.rpartition("/")[0]

    def _send(self, path: str, is_dir: bool) -> None:
        rel = os.fsencode(path[len(self.top) + 1:])
        self.asked[path] = rel
        stdin = self._proc.stdin if self._proc else None
        try:
            if stdin is not None:
                stdin.write(rel + (b"/\0" if is_dir else b"\0"))
        except OSError:
            self._stop()

    def answer(self) -> set[str]:
        """The ignored paths among those asked."""
        proc = self._proc
        if proc is None or not self.asked:
            self._stop()
            return set()
        try:
            assert proc.stdin is not None
            proc.stdin.close()
        except OSError:
            pass
        if self._reader is not None:
            self._reader.join()
        if proc.wait() not in (0, 1) or not self._output:
            return set()
        hits = {p.rstrip(b"/") for p in self._output[0].split(b"\0") if p}
        hits -= _tracked(Path(self.top), hits) if hits else set()
        return {p for p, rel in self.asked.items() if rel in hits}

    def _stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
        self._proc = None


def _tracked(project: Path, among: set[bytes]) -> set[bytes]:
    """Which of ``among`` (relative paths) the index tracks (with a few, asking only
    about them: a large index lists slowly)."""
    ask = ["--", *sorted(os.fsdecode(p) for p in among)] if len(among) <= 100 else []
    try:
        proc = plumbing.run_in(project, "--literal-pathspecs", "ls-files", "-z", *ask)
    except OSError:
        return set()
    return set(proc.stdout.split(b"\0")) & among
