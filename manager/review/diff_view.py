"""``workspace diff`` as text: full diffs of what a person reviews, summaries of the rest.

What the project's ignore rules ignore, git's internal files and large new
directories elsewhere are one line each unless named (or ``--all``): a
``pip install`` must not bury two source edits under 15 MB of site-packages.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from manager import ui
from manager.changes import diff as diff_mod
from manager.changes.display import display_path
from manager.changes.model import Change
from manager.changes.model import EntryType
from manager.git.view import GitView
from manager.review import lines as lines_mod
from manager.review.grouping import Groups

MAX_NEW_DIR_FILES = 20   # a new directory with more files is summarised unless named


def reviewed(groups: Groups, git: GitView, expand: bool) -> tuple[list[Change], list[str]]:
    """(changes to diff in full, one-line summaries of what is left out)."""
    shown: list[Change] = []
    notes: list[str] = []
    for entry in groups.project:
        if entry.change.below is None:
            shown.extend(entry.members)
        else:
            notes.append(_new_dir_note(entry.change, entry.files))
    shown.extend(git.flagged)
    if expand:
        shown.extend(git.hidden)
        shown.extend(c for entries in groups.ignored.values() for e in entries for c in e.members)
    else:
        if git.hidden:
            notes.append(f"{ui.count(len(git.hidden), 'file')} under .git not shown "
                         "(objects, logs, index): workspace status shows what they mean")
        for label, entries in groups.ignored.items():
            files = sum(e.files for e in entries)
            notes.append(f"{ui.quote(label)}: {ui.count(files, 'ignored file')} not shown "
                         f"(workspace diff {ui.quote(label)})")
    for entries in groups.elsewhere.values():
        for entry in entries:
            if entry.change.below is None:
                shown.extend(entry.members)
            else:
                notes.append(_new_dir_note(entry.change, entry.files))
    # Path order (by components): "/" sorts before any character a name can hold.
    shown.sort(key=lambda c: (not c.in_project, c.real_path.replace("/", "\0")))
    return shown, notes


def _new_dir_note(change: Change, files: int) -> str:
    return (f"{ui.quote(change.real_path + '/')}: new directory, {files:,} files not shown "
            f"(workspace diff {ui.quote(change.real_path)})")


def stat_lines(changes: list[Change], project: Path) -> list[str]:
    """``git diff --stat``: one line per file, then the totals."""
    rows = []
    for change in changes:
        if (change.new_type or change.old_type) is not EntryType.DIR:
            counted = lines_mod.count(change)
            rows.append((display_path(change, project), counted))
    width = max((len(name) for name, _ in rows), default=0)
    out = []
    added = removed = 0
    for name, counted in rows:
        added += counted.added
        removed += counted.removed
        if counted.binary:
            out.append(f" {name.ljust(width)} | Bin")
        else:
            total = counted.added + counted.removed
            out.append(f" {name.ljust(width)} | {total:5} {_bar(counted)}")
    out.append(_stat_summary(len(rows), added, removed))
    return out


def _bar(counted: lines_mod.Count, width: int = 40) -> str:
    total = counted.added + counted.removed
    if total <= width:
        return "+" * counted.added + "-" * counted.removed
    plus = round(width * counted.added / total)
    return "+" * plus + "-" * (width - plus)


def name_lines(changes: list[Change], project: Path) -> list[str]:
    return [display_path(c, project) for c in changes]


def full(changes: list[Change], project: Path, colour: bool) -> Iterator[str]:
    """The diff's lines, made as they are written."""
    return diff_mod.stream(changes, project, color=colour)


def _stat_summary(files: int, added: int, removed: int) -> str:
    """git's last ``--stat`` line: a zero count is left out unless both are zero."""
    text = f" {ui.count(files, 'file')} changed"
    if added or not removed:
        text += f", {ui.count(added, 'insertion')}(+)"
    if removed or not added:
        text += f", {ui.count(removed, 'deletion')}(-)"
    return text
