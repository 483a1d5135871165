"""``workspace commit -p``: choose hunk by hunk, as ``git add -p`` does.

Text files are offered hunk by hunk (y/n/q/a/d/s/e/?); other changes (new,
deleted, binary files, links, modes) as a whole. Nothing is written until the
questions end: then the chosen hunks go to the real files and the chosen whole
files are committed in one crash-safe batch.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from manager import ui
from manager.changes import hunks as hunks_mod
from manager.changes.display import display_path
from manager.changes.hunks import Hunk
from manager.changes.model import Change
from manager.changes.model import EntryType
from manager.changes.model import Kind
from manager.changes.sniff import looks_binary
from manager.fs.regular import read_below
from manager.fs.regular import read_regular

HELP = """y - commit this hunk
n - do not commit this hunk
q - quit; do not commit this hunk or any of the remaining ones
a - commit this hunk and all later hunks in the file
d - do not commit this hunk or any of the later hunks in the file
s - split the current hunk into smaller hunks
e - manually edit the current hunk
? - print help"""
MAX_TEXT = 4 << 20


@dataclass
class FilePlan:
    change: Change
    old: bytes
    new: bytes
    hunks: list[Hunk]

    def result(self) -> bytes:
        return hunks_mod.apply(self.old.splitlines(keepends=True), self.hunks)

    @property
    def all_taken(self) -> bool:
        return all(h.taken for h in hunks_mod.leaves(self.hunks))

    @property
    def any_taken(self) -> bool:
        return any(h.taken for h in hunks_mod.leaves(self.hunks))


@dataclass
class Choices:
    partial: list[FilePlan] = field(default_factory=list)   # some hunks, not all
    whole: list[Path] = field(default_factory=list)          # commit as they are
    # The text files taken whole (every hunk): the sandbox's bytes as their hunks showed them.
    shown: list[FilePlan] = field(default_factory=list)


class Quit(Exception):
    pass


Ask = Callable[[str], str]


def choose(changes: list[Change], project: Path, ask: Ask, say: Callable[[str], None]) -> Choices:
    choices = Choices()
    try:
        for change in changes:
            plan = text_plan(change)
            if plan is None:
                _choose_whole(change, project, ask, say, choices)
            elif plan.hunks:
                _choose_hunks(plan, project, ask, say)
                _record(plan, choices)
    except Quit:
        pass
    return choices


def text_plan(change: Change) -> FilePlan | None:
    """Hunks for a modified text file; None for anything chosen as a whole."""
    if change.kind is not Kind.MODIFIED or change.new_type is not EntryType.FILE \
            or change.old_type is not EntryType.FILE:
        return None
    try:
        if max(os.lstat(change.path).st_size, os.lstat(change.upper).st_size) > MAX_TEXT:
            return None
        # Below the upper root no symlink is followed: a call may swap a directory for one
        # to a host directory while the question waits.
        old, new = read_regular(change.path), read_below(change.upper_root, change.upper_path)
    except OSError:
        return None
    if looks_binary(old) or looks_binary(new):
        return None
    return FilePlan(change, old, new, hunks_mod.hunks(old.splitlines(keepends=True),
                                                      new.splitlines(keepends=True)))


def _record(plan: FilePlan, choices: Choices) -> None:
    if plan.all_taken:
        choices.whole.append(plan.change.path)
        choices.shown.append(plan)
    elif plan.any_taken:
        choices.partial.append(plan)


def _choose_whole(change: Change, project: Path, ask: Ask, say: Callable[[str], None],
                  choices: Choices) -> None:
    what = {Kind.ADDED: "added", Kind.DELETED: "deleted", Kind.MODE: "mode change of",
            Kind.XATTRS: "extended attributes of", Kind.REPLACED: "replaced",
            Kind.MODIFIED: "modified (binary)"}[change.kind]
    kind = "directory" if (change.new_type or change.old_type) is EntryType.DIR else "file"
    while True:
        answer = ask(f"Commit {what} {kind} {display_path(change, project)} [y,n,q,?]? ")
        if answer == "y":
            choices.whole.append(change.path)
            return
        if answer == "n":
            return
        if answer == "q":
            raise Quit
        say("y - commit it\nn - leave it pending\nq - quit\n? - print help")


def _choose_hunks(plan: FilePlan, project: Path, ask: Ask, say: Callable[[str], None]) -> None:
    old_lines = plan.old.splitlines(keepends=True)
    name = display_path(plan.change, project)
    say(f"diff --git a/{name} b/{name}")
    queue = list(plan.hunks)
    index = 0
    while index < len(queue):
        hunk = queue[index]
        say("\n".join(ui.shown(line) for line in hunk.lines(old_lines)))
        options = "y,n,q,a,d" + (",s" if hunk.splittable else "") + ",e,?"
        answer = ask(f"({index + 1}/{len(queue)}) Commit this hunk [{options}]? ")
        if answer in ("y", "n"):
            hunk.taken = answer == "y"
        elif answer in ("a", "d"):
            for rest in queue[index:]:
                rest.taken = answer == "a"
            return
        elif answer == "q":
            raise Quit
        elif answer == "s" and hunk.splittable:
            hunk.parts = hunks_mod.split(hunk, old_lines)
            say(f"Split into {len(hunk.parts)} hunks.")
            queue[index:index + 1] = hunk.parts
            continue
        elif answer == "e":
            replacement = _edit(hunk, old_lines, say)
            if replacement is not None:
                hunk.parts = [replacement]
                replacement.taken = True
        else:
            say(HELP)
            continue
        index += 1


def _edit(hunk: Hunk, old_lines: list[bytes], say: Callable[[str], None]) -> Hunk | None:
    text = "\n".join(hunk.lines(old_lines)[1:]) + (
        "\n# Edit the hunk: remove '-' lines' minus to keep them, delete '+' lines to drop them."
        "\n# Lines starting with # are removed.\n")
    with tempfile.NamedTemporaryFile("w+", suffix=".diff", delete=False) as handle:
        handle.write(text)
    try:
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        subprocess.run([*shlex.split(editor), handle.name], check=False)
        result = hunks_mod.edited(hunk, old_lines, Path(handle.name).read_text())
    finally:
        os.unlink(handle.name)
    if result is None:
        say("Your edited hunk does not apply; it was left as it was.")
    return result


def terminal_ask(prompt: str) -> str:
    ui.ask(prompt)
    line = sys.stdin.readline()
    if not line:
        raise Quit
    return line.strip().lower()[:1]
