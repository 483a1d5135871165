"""Git directories that the project's ``.git`` keeps for others: a submodule's
(``modules/<path>``) and a linked worktree's (``worktrees/<name>``).

What git applies for the project (refs, HEAD, objects, reflogs) is its own; these hold
another repository's objects and refs, or a worktree's HEAD and index, which nothing
re-creates: dropped with the project's internals, the submodule or worktree the agent
made is left pointing at nothing. So they are committed as files, and what in them can
make git run a program or look elsewhere is flagged, as the project's own is.
"""

from __future__ import annotations

NESTED = ("modules", "worktrees")
# Anywhere below a nested git dir: its hooks, its info (exclude), its config, and the
# files that say where a worktree's repository and checkout are.
FLAGGED_DIRS = ("hooks", "info")
FLAGGED_FILES = ("config", "config.worktree", "commondir", "gitdir")


def is_nested(rel: tuple[str, ...]) -> bool:
    """Whether ``rel`` (parts below ``.git``) is in a git dir kept for another."""
    return len(rel) > 1 and rel[0] in NESTED


def is_flagged(rel: tuple[str, ...]) -> bool:
    """Whether a nested path can change what git runs or sees (by any of its names below
    the top: a submodule's path may be deep, ``modules/a/b/config``)."""
    return rel[-1] in FLAGGED_FILES or any(part in FLAGGED_DIRS for part in rel[1:-1])
