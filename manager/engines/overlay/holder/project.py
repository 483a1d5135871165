"""Show what changed in the real project without a fresh sandbox (stdlib only).

overlayfs caches lookups: a name that appears, goes or is replaced on the real filesystem
(an editor's atomic save; Claude Code's Write and Edit tools save that way too) keeps its
old answer in a mount that has looked it up. The holder used to retire on the first such
change, so the next call paid for a fresh holder (~0.5 s) after every edit made outside.
Now the next call's sync mounts a fresh overlay of the same layers over the old one
(``levels.refresh_entry``): new lookups, the same upper directory, the masks and binds
below moved across, in a few milliseconds.

Only while no command runs in the sandbox: a running command holds the old mount, and two
overlays sharing an upper directory must not be used at once. Until then calls see the
sandbox as it was (as before); a fresh holder still follows when a refresh cannot be made:
the project is a snapshotted level or the root, the watch lost events, or a ``hide``
pattern now matches a path it did not (only a fresh sandbox mounts a new mask).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from . import levels
from . import mountinfo

if TYPE_CHECKING:
    from pathlib import Path

    from .build import Builder
    from .watch import Watch

PATTERNS_FILE = "hide.patterns"   # manager.hide.PATTERNS_FILE
GLOB_CHARS = frozenset("*?[")


class ProjectView:
    """The mount that shows the project, and whether it must be refreshed before a call."""

    def __init__(self, project: str, watch: Watch, sandbox: Path) -> None:
        self.project = project
        self.watch = watch
        self.patterns = _read_patterns(sandbox)
        self.stale = False
        self.point = ""   # the overlay holding the project, once found (after the build)

    def find_point(self, builder: Builder) -> None:
        """The deepest mount at or above the project, when it is one of the build's plain
        overlays (a level's snapshot, "/" or a hidden path is not refreshed this way)."""
        points = {p for _, _, p, _ in mountinfo.rows(mountinfo.read())}
        holding = [p for p in points if p != "/" and within(self.project, p)]
        point = max(holding, key=len, default="")
        if point and point not in builder.levels and point not in builder.hidden:
            self.point = point

    def refresh(self, builder: Builder) -> str:
        """Bring the project's mount up to date: "" when done, else why a fresh holder must."""
        if not self.point:
            return "the real project changed"
        if self.watch.lost:
            return "the real project changed beyond what the watch could follow"
        new = self.new_hidden(builder)
        if new:
            return f"{new} is hidden and appeared after the sandbox started"
        levels.refresh_entry(builder, self.point)
        self.watch.follow_new_directories(builder.real_prefix)
        self.stale = False
        return ""

    def new_hidden(self, builder: Builder) -> str:
        """A path a ``hide`` pattern names below the refreshed mount that the sandbox does not
        hide yet ("" when none). A glob there counts as new: expanding it could take long."""
        with levels.host_view(builder):   # host paths, symlinks as the host resolves them
            for pattern in self.patterns:
                fixed = _fixed_part(pattern)
                # The mount point is a real path; a pattern may reach it through a symlink.
                real = os.path.realpath(fixed)
                if fixed != pattern:
                    if within(real, self.point) or within(self.point, real):
                        return pattern
                elif within(real, self.point) and os.path.lexists(pattern) and \
                        not any(within(real, hidden) for hidden in builder.hidden):
                    return pattern
        return ""


def within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _fixed_part(pattern: str) -> str:
    """The pattern itself without glob characters, else the directory above the first."""
    cut = min((pattern.index(c) for c in GLOB_CHARS if c in pattern), default=-1)
    return pattern if cut < 0 else os.path.dirname(pattern[:cut])


def _read_patterns(sandbox: Path) -> list[str]:
    try:
        text = os.fsdecode((sandbox / PATTERNS_FILE).read_bytes())   # names need not be UTF-8
    except FileNotFoundError:
        return []
    return [line for line in text.split("\0") if line.startswith("/")]   # NUL-ended
