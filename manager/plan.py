"""Plan a commit: which steps to take, which paths conflict, which are excluded.

Planning only reads. A conflict is a real path that changed after the overlay
copied it up (or after the sandbox created or deleted it): its ctime is later
than the upper entry's birth. Directories are not checked themselves (their
ctime moves whenever a child changes); removing a whole real tree checks
everything in it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from pathlib import Path

from manager.btime import birth_ns
from manager.changes import Change
from manager.changes import EntryType
from manager.changes import Kind
from manager.changes import Layer
from manager.changes import is_whiteout
from manager.changes import same_content
from manager.journal import Step
from manager.safefs import walk_stats

AT_FDCWD = -100


@dataclass(frozen=True)
class PathIssue:
    path: Path
    reason: str

    def as_json(self) -> dict[str, str]:
        return {"path": str(self.path), "reason": self.reason}


@dataclass
class Plan:
    steps: list[Step] = field(default_factory=list)
    conflicts: list[PathIssue] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    incomplete: set[Path] = field(default_factory=set)  # dirs whose hidden real entries stay


def make_plan(layers: Sequence[Layer], all_changes: list[Change], selected: list[Change], *,
              excluded: Callable[[Path], bool], force: bool) -> Plan:
    plan = Plan()
    opaque = {c.path for c in all_changes if c.opaque}
    blocked: set[Path] = set()
    for change in with_parents(selected, all_changes):
        if excluded(change.path):
            plan.skipped.append(change.path)
        elif _under(change.path, blocked):
            plan.conflicts.append(PathIssue(change.path, "inside a path that is not committed"))
            blocked.add(change.path)
        else:
            _plan_change(plan, layers, change, _under(change.path, opaque) or change.opaque,
                         excluded, force, blocked)
    return _hold_opaque(plan, all_changes, opaque)


def with_parents(selected: list[Change], all_changes: list[Change]) -> list[Change]:
    """``selected`` plus the added or replaced parent directories they cannot exist without."""
    by_path = {c.path: c for c in all_changes}
    wanted = {c.path: c for c in selected}
    for change in selected:
        for parent in change.path.parents:
            found = by_path.get(parent)
            if found is not None and _creates_dir(found):
                wanted.setdefault(parent, found)
    return sorted(wanted.values(), key=lambda c: c.path.parts)


def _creates_dir(change: Change) -> bool:
    if change.kind is Kind.ADDED:
        return True
    return change.kind is Kind.REPLACED and change.old_type is not EntryType.DIR


def _under(path: Path, roots: set[Path]) -> bool:
    return any(parent in roots for parent in path.parents)


def layer_of(layers: Sequence[Layer], upper: Path) -> int:
    for index, layer in enumerate(layers):
        if upper == layer.upper or layer.upper in upper.parents:
            return index
    raise ValueError(f"{upper} is in no layer")


def step_for(layers: Sequence[Layer], change: Change) -> Step:
    if change.kind is Kind.DELETED:
        action = "remove"
    elif change.new_type is EntryType.DIR:
        action = "dir"
    else:
        action = "write"
    return Step(action, layer_of(layers, change.upper), str(change.path), str(change.upper))


def _plan_change(plan: Plan, layers: Sequence[Layer], change: Change, hides_real: bool,
                 excluded: Callable[[Path], bool], force: bool, blocked: set[Path]) -> None:
    step = step_for(layers, change)
    reason = None if force else conflict(change, step.action, hides_real)
    if reason is not None:
        plan.conflicts.append(PathIssue(change.path, reason))
        blocked.add(change.path)
        return
    plan.steps.append(step)
    if step.action == "dir" and hides_real:
        _plan_prune(plan, step, change, excluded, force)


def conflict(change: Change, action: str, hides_real: bool) -> str | None:
    """Why committing ``change`` would overwrite work done outside the sandbox, if it would."""
    try:
        rst = os.lstat(change.path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if action == "dir" and stat.S_ISDIR(rst.st_mode):
        return None
    if action != "remove" and _already_applied(change, rst):
        return None
    if change.kind is Kind.ADDED and not hides_real:
        return "created outside the sandbox after the sandbox created it"
    if changed_since(change.path, birth_ns(AT_FDCWD, str(change.upper))):
        return "changed outside the sandbox after the sandbox " + (
            "deleted it" if action == "remove" else "copied it")
    return None


def _already_applied(change: Change, rst: os.stat_result) -> bool:
    ust = os.lstat(change.upper)
    if stat.S_IFMT(ust.st_mode) != stat.S_IFMT(rst.st_mode):
        return False
    return ust.st_mode == rst.st_mode and same_content(change.upper, ust, change.path, rst)


def changed_since(path: Path, since_ns: int) -> bool:
    """True when ``path`` or anything below it has a ctime after ``since_ns``."""
    return any(st.st_ctime_ns > since_ns for st in walk_stats(AT_FDCWD, str(path)))


def _plan_prune(plan: Plan, step: Step, change: Change, excluded: Callable[[Path], bool],
                force: bool) -> None:
    """Remove the real entries a replaced directory hides (those absent from upper)."""
    since = birth_ns(AT_FDCWD, str(change.upper))
    for child in _hidden_real(change):
        if excluded(child):
            plan.skipped.append(child)
            plan.incomplete.add(change.path)
        elif not force and changed_since(child, since):
            plan.conflicts.append(PathIssue(child, "changed outside the sandbox after the "
                                                   "sandbox replaced its directory"))
            plan.incomplete.add(change.path)
        else:
            plan.steps.append(Step("remove", step.layer, str(child), None))


def _hidden_real(change: Change) -> list[Path]:
    try:
        real = set(os.listdir(change.path)) if change.path.is_dir() else set()
    except OSError:
        return []
    return [change.path / name for name in sorted(real - _live_names(change.upper))]


def _live_names(upper: Path) -> set[str]:
    names = set()
    for entry in os.scandir(upper):
        if not is_whiteout(Path(entry.path), entry.stat(follow_symlinks=False)):
            names.add(entry.name)
    return names


def _hold_opaque(plan: Plan, all_changes: list[Change], opaque: set[Path]) -> Plan:
    """Keep upper copies inside an opaque directory that is not wholly committed.

    Moving a child out of such a directory would make the overlay hide its real
    copy: the sandbox's view must not change under a partial commit.
    """
    stepped = {Path(s.path) for s in plan.steps}
    unfinished = {c.path for c in all_changes if c.path not in stepped} | plan.incomplete
    held = {root for root in opaque if _touches(root, unfinished)}
    if held:
        plan.steps = [_keep(s, held) for s in plan.steps]
    return plan


def _touches(root: Path, paths: Iterable[Path]) -> bool:
    return any(p == root or root in p.parents for p in paths)


def _keep(step: Step, held: set[Path]) -> Step:
    path = Path(step.path)
    if step.upper is not None and (path in held or _under(path, held)):
        return replace(step, keep_upper=True)
    return step
