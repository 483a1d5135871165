"""``workspace status`` as text: long (grouped, like git status) and short (one line each)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from manager import ui
from manager.changes import meta
from manager.changes.display import display_path
from manager.changes.model import Change
from manager.changes.model import EntryType
from manager.changes.model import Kind
from manager.fs import longpath
from manager.git.view import GitView
from manager.git.view import RefChange
from manager.git.view import symbolic_target
from manager.record import Value
from manager.review import lines as lines_mod
from manager.review.grouping import Entry
from manager.review.grouping import Groups

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.record
if TYPE_CHECKING:
    from typing import Final

COLOUR = {Kind.ADDED: "green", Kind.MODIFIED: "yellow", Kind.MODE: "yellow",
          Kind.XATTRS: "yellow", Kind.DELETED: "red", Kind.REPLACED: "blue"}
SHORT = {Kind.ADDED: "A", Kind.MODIFIED: "M", Kind.MODE: "M", Kind.XATTRS: "M",
         Kind.DELETED: "D", Kind.REPLACED: "T"}
MAX_COUNTED = 2000     # above this many project files, lines are not counted
LIST_OUTSIDE = 3       # an outside group with at most this many entries is listed

Paint = Callable[[str, str], str]


class Totals(Value):
    __slots__ = ("files", "added", "removed")
    files: Final[int]
    added: Final[int | None]      # None: not counted (too many files)
    removed: Final[int | None]

    def __init__(self, files: int, added: int | None, removed: int | None) -> None:
        self.files = files
        self.added = added
        self.removed = removed


def totals(entries: list[Entry]) -> Totals:
    members = [c for e in entries for c in e.members]
    files = sum(e.files for e in entries)
    if len(members) + sum(c.below or 0 for c in members) > MAX_COUNTED:
        return Totals(files, None, None)
    added = removed = 0
    for change in members:
        # A new directory summarised as one change: its files, all new, count as added.
        counted = lines_mod.count(change) if change.below is None \
            else lines_mod.count_new_tree(change.upper_path)
        added += counted.added
        removed += counted.removed
    return Totals(files, added, removed)


def summary_line(groups: Groups, counted: Totals) -> str:
    lines = "" if counted.added is None else f" (+{counted.added} -{counted.removed} lines)"
    parts = [f"{ui.count(counted.files, 'file')} changed in the project{lines}"]
    if groups.ignored:
        parts.append(f"{groups.ignored_files:,} ignored")
    if groups.elsewhere:
        parts.append(f"{groups.elsewhere_files:,} elsewhere")
    return ", ".join(parts)


def long_form(groups: Groups, git: GitView, project: Path, paint: Paint,
              expand: bool) -> list[str]:
    out = [summary_line(groups, totals(groups.project))]
    if groups.project:
        out.append("Changes in the project:")
        out.extend(_entry_line(e, project, paint) for e in groups.project)
        out.append("")
    out.extend(git_lines(git, paint, expand))
    if groups.ignored:
        out.append(f"Ignored by the project's rules ({ui.count(groups.ignored_files, 'file')}):")
        for label, entries in groups.ignored.items():
            if expand:
                out.extend(_entry_line(e, project, paint) for e in entries)
            else:
                files = sum(e.files for e in entries)
                out.append(paint(f"  {ui.quote(label)} ({ui.count(files, 'file')})", "dim"))
        out.append("")
    if groups.elsewhere:
        out.append(f"Changes elsewhere on the system ({ui.count(groups.elsewhere_files, 'file')}):")
        for label, entries in groups.elsewhere.items():
            if expand or len(entries) <= LIST_OUTSIDE:
                out.extend(_entry_line(e, project, paint) for e in entries)
            else:
                files = sum(e.files for e in entries)
                out.append(f"  {ui.quote(label + '/')} ({ui.count(files, 'file')} in "
                           f"{ui.count(len(entries), 'entry', 'entries')})")
        out.append("")
    return out


def short_form(groups: Groups, git: GitView, project: Path) -> list[str]:
    out = [f"{SHORT[e.change.kind]}  {_label(e, project)}" for e in groups.project]
    out.extend(f"G  {_ref_text(r)}" for r in git.refs)
    out.extend(f"!  {display_path(c, project)} (security-relevant)" for c in git.flagged)
    out.extend(f"!! {ui.quote(label)}" for label in groups.ignored)
    for entries in groups.elsewhere.values():
        out.extend(f"{SHORT[e.change.kind]}  {_label(e, project)}" for e in entries)
    return out


def git_lines(git: GitView, paint: Paint, expand: bool) -> list[str]:
    if git.empty:
        return []
    out = ["Git (in the sandbox):"]
    shown: set[str] = set()
    for ref in sorted(git.refs, key=_ref_order):
        out.append("  " + _ref_text(ref))
        if ref.kind == "tag" or all(c.short in shown for c in ref.commits):
            continue
        out.extend(paint(f"      {c.short} {ui.shown(c.subject)}", "dim") for c in ref.commits)
        shown.update(c.short for c in ref.commits)
        if ref.more:
            out.append(paint(f"      ... and {ref.more} more", "dim"))
    if git.head:
        out.append(f"  HEAD: now {ui.shown(git.head[1])} (was {ui.shown(git.head[0])})")
    if git.stash_added:
        out.append(f"  stash: {ui.count(git.stash_added, 'new entry', 'new entries')}")
    for change in git.flagged:
        out.append(paint(f"  security-relevant: {change.kind.value} {ui.quote(change.path.name)}"
                         f" ({ui.quote(change.real_path)})", "red"))
    if git.hidden and expand:
        out.extend(f"  {c.kind.value + ':':10} {ui.quote(c.real_path)}" for c in git.hidden)
    elif git.hidden and not (git.refs or git.head or git.stash_added):
        out.append(paint(f"  {ui.count(len(git.hidden), 'internal file')} changed "
                         "(objects, logs, index: --all lists them)", "dim"))
    out.append("")
    return out


def _ref_order(ref: RefChange) -> tuple[int, str]:
    rank = {"branch": 0, "tag": 2, "stash": 3}.get(ref.kind, 4)
    return (rank + (ref.old is None), ref.ref)


def _ref_text(ref: RefChange) -> str:
    name = ui.quote(ref.short_name)
    if ref.kind == "stash":
        return "stash changed"
    if ref.symbolic:
        return _symbolic_text(ref)
    if ref.old is None:
        extra = f", {ui.count(len(ref.commits) + ref.more, 'new commit')}" if ref.kind == "branch" else ""
        return f"{ref.kind} created: {name} at {ref.new[:7] if ref.new else '?'}{extra}"
    if ref.new is None:
        return f"{ref.kind} deleted: {name} (was {ref.old[:7]})"
    count = len(ref.commits) + ref.more
    how = "" if ref.fast_forward else f" (rewritten: was {ref.old[:7]}, not an ancestor)"
    if ref.kind == "branch" and count:
        return f"{ui.count(count, 'new commit')} on {name}{how}"
    return f"{ref.kind} moved: {name} {ref.old[:7]} -> {ref.new[:7]}{how}"


def _symbolic_text(ref: RefChange) -> str:
    """A symbolic ref by the names it points to (``origin/HEAD -> origin/main``)."""
    def shown(value: str | None) -> str:
        target = symbolic_target(value)
        if target is not None:
            return target.removeprefix("refs/remotes/").removeprefix("refs/heads/")
        return value[:7] if value else "?"
    if ref.old is None:
        return f"{ref.kind} created: {ref.short_name} -> {shown(ref.new)}"
    if ref.new is None:
        return f"{ref.kind} deleted: {ref.short_name} (was -> {shown(ref.old)})"
    return f"{ref.kind} changed: {ref.short_name} -> {shown(ref.new)} (was -> {shown(ref.old)})"


LABELS = {kind: f"{kind.value}:".ljust(10) for kind in Kind}


def _entry_line(entry: Entry, project: Path, paint: Paint) -> str:
    change = entry.change
    label = LABELS[change.kind]
    if change.special:
        line = paint(f"  {label} {_label(entry, project)}{_special_note(change)}", "red")
    else:
        line = paint(f"  {label} {_label(entry, project)}{_type_note(change)}"
                     f"{_owner_note(change)}", COLOUR[change.kind])
    if len(entry.members) == 1:
        return line
    # Powerful entries are never hidden in a collapsed directory's count.
    below = [paint(f"  {LABELS[c.kind]} {display_path(c, project)}{_special_note(c)}",
                   "red") for c in entry.members[1:] if c.special]
    return "\n".join([line, *below])


def _special_note(change: Change) -> str:
    return f"  [{', '.join(change.special)}: commit needs --allow-special]"


def _owner_note(change: Change) -> str:
    """Another owner than natively (as a command inside saw it: uid:gid)."""
    return f"  [owner {change.owner[0]}:{change.owner[1]}]" if change.owner else ""


def _type_note(change: Change) -> str:
    """Fifos and sockets by name: "added: x" alone reads as a file."""
    if change.new_type is not EntryType.OTHER:
        return ""
    try:
        name = meta.type_name(longpath.lstat(change.upper_path).st_mode)
    except OSError:
        return ""
    return f"  [{name}]" if name else ""


def _label(entry: Entry, project: Path) -> str:
    text = display_path(entry.change, project)
    if entry.collapsed:
        text += f" ({ui.count(entry.files, 'file')})"
    return text
