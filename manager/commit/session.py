"""One commit of a session: read the changes once, plan once, apply, then the history.

The command parses and prints; everything between is here. When the commit covers
``.git``, the agent's git history is applied through git (:mod:`manager.commit.history`):
git's internals and the security-relevant files not named on the command line are
excluded from the plan; the plan's conflicts decide whether HEAD's branch goes to a side
branch; the work-tree files that then stay on that branch are withheld from the plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from manager.changes.model import Change
from manager.changes.model import Layer
from manager.changes.model import holds_a_mask
from manager.changes.model import is_within
from manager.changes.model import read_changes
from manager.changes.model import select
from manager.changes.seen import Seen
from manager.commit import apply
from manager.commit import history as history_mod
from manager.commit import trees
from manager.commit.exclude import Literal
from manager.commit.exclude import compile_patterns
from manager.commit.plan import Plan
from manager.commit.plan import make_plan
from manager.commit.plan import withhold


@dataclass(frozen=True)
class Target:
    """What a session commit needs of the session (commit/ sits below session/)."""
    session_dir: Path
    project: Path
    session_id: str
    created: float


@dataclass
class SessionCommit:
    result: apply.CommitResult
    history: history_mod.History | None = None
    applied: history_mod.HistoryResult | None = None
    discarded: list[str] = field(default_factory=list)   # upper copies of what git applied

    @property
    def ok(self) -> bool:
        return self.result.ok and not (self.applied and self.applied.problems)

    def as_json(self) -> dict[str, object]:
        return {**self.result.as_json(), "git": self.applied.as_json() if self.applied else None}


def commit_session(target: Target, layers: Sequence[Layer], paths: Sequence[Path], *,
                   exclude: Sequence[str] = (), kept: Sequence[str] = (), force: bool = False,
                   allow_special: bool = False, progress: apply.Progress | None = None,
                   vet: apply.Vet | None = None) -> SessionCommit:
    """Apply the session's changes at or below ``paths`` (all when empty); ``kept``: the
    paths kept out (state, hidden), above which a directory's mode is never applied, as
    review never shows it (``holds_a_mask``); ``vet``: asked of the changes as this commit
    reads them, before anything of them is applied (it raises to refuse)."""
    project = target.project
    done = SessionCommit(apply.CommitResult())
    apply.resume(target.session_dir, project, done.result)
    collector = trees.Collector(project)
    changes = [c for c in read_changes(list(layers), project, collapse=collector)
               if not holds_a_mask(c, kept)]
    history = _history(target, changes, paths)
    dropped: list[Path] = []
    if history is not None:
        dropped = history_mod.internals(history.repo.git_dir, history.changes, history.flagged)
        held = [f for f in history.flagged if not _named(f, paths, project)]
        exclude = [*exclude, *map(Literal, map(str, dropped)), *map(Literal, map(str, held))]
    excluded = compile_patterns(exclude, project)
    changes, whole = trees.settle(changes, collector.trees, paths, excluded)
    printed = apply.vetted(changes, select(changes, list(paths)), whole, vet)

    def planned() -> Plan:
        return make_plan(layers, changes, select(changes, list(paths)), excluded=excluded,
                         force=force, allow_special=allow_special,
                         seen=Seen(target.session_dir), trees=whole, fingerprints=printed)

    plan = planned()
    if history is not None:
        history_mod.divert_head_on_conflict(history, [i.path for i in plan.conflicts])
        worktree = _worktree(changes, paths, project)
        if any(p.ref == history.head_ref and p.divert_to for p in history.plans):
            worktree = trees.expanded(worktree, whole)   # its files are compared one by one
        history.kept = history_mod.committed_paths(history, worktree)
        if trees.holding(whole, history.kept):   # files that stay on the side branch
            changes, whole = trees.settle(changes, whole, [*paths, *history.kept], excluded)
            # Its entries are planned one by one now: fingerprinted, then vetted, again
            # (attack pass 23: fingerprinted after the vet, a write between was copied).
            printed = apply.vetted(changes, select(changes, list(paths)), whole, vet)
            plan = planned()   # the same conflicts: a tree's entries are all new
        plan = withhold(plan, history.kept, changes)
    apply.carry_out(target.session_dir, layers, changes, plan, done.result, force=force,
                    progress=progress)
    if history is not None:
        done.history, done.applied = history, history_mod.apply(history)
        dropped = [*dropped, *history.kept]
        if not done.applied.problems and dropped:   # never empty: that would discard everything
            gone = apply.discard(target.session_dir, layers, project, dropped, guard=False)
            done.discarded = [c.real_path for c in gone]
    return done


def _history(target: Target, changes: list[Change],
             paths: Sequence[Path]) -> history_mod.History | None:
    """The agent's git history to apply through git, when the commit covers ``.git``."""
    git_dir = target.project / ".git"
    if paths and not any(p == git_dir or git_dir in p.parents or p in git_dir.parents
                         for p in paths):
        return None
    under_git = [c for c in changes if is_within(c.real_path, git_dir)]
    return history_mod.prepare(target.project, under_git, target.session_id,
                               since=target.created)


def _worktree(changes: list[Change], paths: Sequence[Path], project: Path) -> list[Change]:
    git_dir = project / ".git"
    return [c for c in select(changes, list(paths))
            if c.in_project and not is_within(c.real_path, git_dir)]


def _named(path: Path, paths: Sequence[Path], project: Path) -> bool:
    """Named on the command line by itself (or a path below .git), not by the project."""
    git_dir = project / ".git"
    return any(p == path or (p in path.parents and p not in (project, git_dir)) for p in paths)
