"""Plan a commit: which steps to take, which paths conflict, which are excluded.

Planning only reads. A conflict is a real path that may have changed after the
sandbox took its view of it: its ctime is not earlier than that moment
(:func:`manager.commit.btime.may_follow`: a tie counts, clocks are coarse), or it
is gone while the sandbox holds its copy-up (and its real directory's names changed
since: else the copy-up was moved or linked there in the sandbox). The moment is the upper entry's
birth only while that entry is the overlay's copy-up of the real file (it carries
the overlay's ``origin`` mark, which nothing inside the sandbox can set). An entry
the sandbox made itself (a file renamed over the path as editors and ``sed -i``
save, delete and recreate, a whiteout) has lost the moment of the first copy-up,
so the birth of the nearest upper directory still merged with its real directory
stands in: no copy-up below it is older (a conflict may be reported that was
none, never the reverse). Directories are not checked themselves (their ctime
moves whenever a child changes); removing a whole real tree checks everything in
it. Such an entry whose real file is gone is a conflict when a walk saw it stand
over the real one (:mod:`manager.changes.seen`): deleted outside, not created by
the sandbox.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from pathlib import Path

from manager.changes.meta import content_xattrs
from manager.changes.meta import is_copy_up
from manager.changes.model import Change
from manager.changes.model import EntryType
from manager.changes.model import Kind
from manager.changes.model import Layer
from manager.changes.model import ancestors
from manager.changes.model import is_whiteout
from manager.changes.model import same_content
from manager.changes.seen import Seen
from manager.commit import judged
from manager.commit.btime import birth_ns
from manager.commit.btime import may_follow
from manager.commit.journal import Step
from manager.commit.safefs import DirChain
from manager.commit.safefs import UnsafePath
from manager.commit.safefs import lstat_at
from manager.commit.safefs import open_dir_at
from manager.commit.safefs import proc_path
from manager.commit.safefs import rel_parts
from manager.commit.safefs import walk_entries
from manager.commit.safefs import walk_stats
from manager.commit.trees import Census

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
    refused: list[PathIssue] = field(default_factory=list)  # special: needs --allow-special
    incomplete: set[Path] = field(default_factory=set)  # dirs whose hidden real entries stay
    trees: dict[str, Census] = field(default_factory=dict)  # tree steps' censuses (commit.trees)


@dataclass
class _Context:
    layers: Sequence[Layer]
    real: list[DirChain]
    excluded: Callable[[Path | str], bool]
    force: bool
    allow_special: bool
    opaque: set[str]    # opaque directories: the real entries below them go
    hiding: set[str]    # added or replaced directories: the real tree below was hidden
    seen: Seen          # names a walk saw the sandbox's own entry stand over a real one
    blocked: set[str] = field(default_factory=set)
    births: dict[str, int] = field(default_factory=dict)  # upper directories' births
    # Real directories found missing: a new tree's 10,000 entries are not each looked up.
    absent: set[str] = field(default_factory=set)
    trees: Mapping[str, Census] = field(default_factory=dict)  # new trees that go whole
    fingerprints: Mapping[str, str] = field(default_factory=dict)   # by upper path

    def real_at(self, change: Change) -> tuple[int, str] | None:
        """The real entry's parent descriptor and name; None when a parent is no real directory."""
        parent = os.path.dirname(change.real_path)
        if parent in self.absent:
            return None
        index = layer_of(self.layers, change.upper_path)
        parts = rel_parts(self.layers[index].target, change.real_path)
        try:
            return self.real[index].fd(parts[:-1]), parts[-1]
        except (FileNotFoundError, UnsafePath):
            self.absent.add(parent)
            return None

    def view_taken(self, change: Change) -> int:
        """When the sandbox stopped seeing the real ``change.path`` as it is (module notes)."""
        upper = str(change.upper)
        if is_copy_up(upper):
            return birth_ns(AT_FDCWD, upper)
        return self.merged_birth(change.path, change.upper)

    def merged_birth(self, path: Path, upper: Path) -> int:
        """Birth of the nearest upper directory above ``path`` that is merged with its real
        directory (not added, replaced or opaque): every copy-up below it is younger."""
        root = str(self.layers[layer_of(self.layers, upper)].upper)
        real, up = os.path.dirname(str(path)), os.path.dirname(str(upper))
        while up.startswith(root + "/") and (real in self.hiding or real in self.opaque):
            real, up = os.path.dirname(real), os.path.dirname(up)
        if up not in self.births:
            self.births[up] = birth_ns(AT_FDCWD, up)
        return self.births[up]


def make_plan(layers: Sequence[Layer], all_changes: list[Change], selected: list[Change], *,
              excluded: Callable[[Path | str], bool], force: bool, allow_special: bool = False,
              seen: Seen | None = None,
              trees: Mapping[str, Census] | None = None,
              fingerprints: Mapping[str, str] | None = None) -> Plan:
    """``seen``: names a walk saw the sandbox's own entry stand over a real one
    (:mod:`manager.changes.seen`). ``trees``: new directories (settled:
    :func:`manager.commit.trees.settle`) each committed as one tree step. ``fingerprints``:
    upper entries' fingerprints taken before the caller checked them against review
    (:func:`fingerprints`; the others are taken here)."""
    plan = Plan()
    ctx = _Context(layers, [DirChain(layer.target) for layer in layers], excluded, force,
                   allow_special,
                   opaque={c.real_path for c in all_changes if c.opaque},
                   hiding={c.real_path for c in all_changes if c.new_type is EntryType.DIR
                           and c.kind in (Kind.ADDED, Kind.REPLACED)},
                   seen=seen or Seen(None), trees=trees or {},
                   fingerprints=fingerprints or {})
    try:
        for change in with_parents(selected, all_changes):
            _plan_one(plan, ctx, change)
    finally:
        for chain in ctx.real:
            chain.forget(())
    return _hold_opaque(plan, all_changes, ctx.opaque)


def _plan_one(plan: Plan, ctx: _Context, change: Change) -> None:
    if ctx.excluded(change.real_path):
        plan.skipped.append(change.path)
    elif _under(change.real_path, ctx.blocked):
        plan.conflicts.append(PathIssue(change.path, "inside a path that is not committed"))
        ctx.blocked.add(str(change.path))
    elif change.special and not ctx.allow_special:
        plan.refused.append(PathIssue(change.path, ", ".join(change.special)))
        ctx.blocked.add(str(change.path))
    else:
        _plan_change(plan, ctx, change)


def with_parents(selected: list[Change], all_changes: list[Change]) -> list[Change]:
    """``selected`` plus the added or replaced parent directories they cannot exist without."""
    wanted = {c.real_path: c for c in selected}
    if len(wanted) == len(all_changes):
        return list(all_changes)  # everything: no parent can be missing
    by_path = {c.real_path: c for c in all_changes}
    climbed: set[str] = set()   # strings, each ancestor once: a tree may be 3,000 deep
    for change in selected:
        parent = os.path.dirname(change.real_path)
        while parent not in climbed and parent != os.path.dirname(parent):
            climbed.add(parent)
            found = by_path.get(parent)
            if found is not None and _creates_dir(found):
                wanted.setdefault(parent, found)
            parent = os.path.dirname(parent)
    return sorted(wanted.values(), key=lambda c: c.real_path.replace("/", "\0"))


def _creates_dir(change: Change) -> bool:
    if change.kind is Kind.ADDED:
        return True
    return change.kind is Kind.REPLACED and change.old_type is not EntryType.DIR


def _under(path: Path | str, roots: set[str]) -> bool:
    """Whether a proper ancestor of ``path`` is in ``roots`` (strings: pathlib is slow here)."""
    return bool(roots) and any(parent in roots for parent in ancestors(str(path)))


def layer_of(layers: Sequence[Layer], upper: Path | str) -> int:
    text = str(upper)
    for index, layer in enumerate(layers):
        root = str(layer.upper)
        if text == root or text.startswith(root.rstrip("/") + "/"):
            return index
    raise ValueError(f"{upper} is in no layer")


def step_for(layers: Sequence[Layer], change: Change) -> Step:
    if change.kind is Kind.DELETED:
        action = "remove"
    elif change.new_type is EntryType.DIR:
        action = "dir"
    else:
        action = "write"
    return Step(action, layer_of(layers, change.upper_path), change.real_path, change.upper_path)


def fingerprints(applying: list[Change], trees: Mapping[str, Census]) -> dict[str, str]:
    """The fingerprints of the upper entries of ``applying`` (a tree's are its census's,
    taken as it was read), to be taken *before* they are checked against review: what is
    checked is then what the steps hold the copies to (attack pass 22)."""
    found = {}
    for change in applying:
        if change.kind is not Kind.DELETED and change.real_path not in trees:
            printed = _judged(change.upper_path)
            if printed is not None:
                found[change.upper_path] = printed
    return found


def _judged(upper: str) -> str | None:
    """The fingerprint of what this plan judged (None: gone; its step then fails)."""
    try:
        return judged.of_upper(upper)
    except OSError:
        return None


def _plan_change(plan: Plan, ctx: _Context, change: Change) -> None:
    step = step_for(ctx.layers, change)
    real = ctx.real_at(change)
    # (hidden only where there is a real entry to judge: a new tree's entries have none)
    if ctx.force:
        reason = None
    elif real is None:   # its real directory is gone: deleted outside with it?
        reason = _deleted_since_replaced(ctx, change, step.action)
    else:
        reason = conflict(ctx, change, step.action, _under(change.real_path, ctx.hiding), *real)
    if reason is not None:
        plan.conflicts.append(PathIssue(change.path, reason))
        ctx.blocked.add(str(change.path))
        return
    if real is not None and step.action != "dir":
        kept = _excluded_below(ctx, *real, change.real_path)
        if kept is not None:      # the real directory it would remove holds an excluded path
            plan.skipped.append(Path(kept))
            ctx.blocked.add(str(change.path))
            return
    census = ctx.trees.get(change.real_path)
    if census is not None:
        step = replace(step, action="tree", judged=census.judged.value)
        plan.trees[step.path] = census
    elif step.upper is not None and step.action != "remove":
        step = replace(step, judged=ctx.fingerprints.get(step.upper) or _judged(step.upper))
    plan.steps.append(step)
    if step.action == "dir" and real is not None and (change.opaque or
                                                      _under(change.real_path, ctx.opaque)):
        _plan_prune(plan, ctx, step, change, *real)


def conflict(ctx: _Context, change: Change, action: str, hidden: bool, dir_fd: int,
             name: str) -> str | None:
    """Why committing ``change`` would overwrite work done outside the sandbox, if it would.

    ``hidden``: an added or replaced parent directory hid the real entry from the
    sandbox, so its existence alone is no sign that someone else created it.
    """
    rst = lstat_at(dir_fd, name)
    if rst is None:
        return _deleted_since_replaced(ctx, change, action) or \
            _deleted_since_copy_up(change, action, dir_fd)
    if action == "dir" and stat.S_ISDIR(rst.st_mode):
        return None
    if action != "remove" and _already_applied(change, rst, dir_fd, name):
        return None
    if change.kind is Kind.ADDED and not hidden:
        return "created outside the sandbox after the sandbox created it"
    if changed_since(dir_fd, name, ctx.view_taken(change)):
        return "changed outside the sandbox after the sandbox " + (
            "deleted it" if action == "remove" else "copied it")
    return None


def _deleted_since_replaced(ctx: _Context, change: Change, action: str) -> str | None:
    """A real entry gone that a walk (or the holder) saw under the sandbox's own entry:
    deleted outside (:mod:`manager.changes.seen`), not a file the sandbox created; for a
    directory, also a name below it (gone with it: its entries, a new tree's too, are never
    each asked)."""
    if action == "remove":
        return None
    if action == "dir" and (ctx.seen.holds(change.real_path)
                            or ctx.seen.holds_below(change.real_path)):
        return "deleted or moved outside the sandbox with what the sandbox had in it"
    if ctx.seen.holds(change.real_path):
        return "deleted outside the sandbox after the sandbox replaced it"
    return None


def _deleted_since_copy_up(change: Change, action: str, dir_fd: int) -> str | None:
    """A copy-up whose real file is gone: deleted outside, if its real directory's names
    changed since (else the copy-up was moved or linked to this name in the sandbox)."""
    if action != "write" or not is_copy_up(str(change.upper)):
        return None
    if not may_follow(os.fstat(dir_fd).st_ctime_ns, birth_ns(AT_FDCWD, str(change.upper))):
        return None
    return "deleted outside the sandbox after the sandbox copied it"


def _already_applied(change: Change, rst: os.stat_result, dir_fd: int, name: str) -> bool:
    ust = os.lstat(change.upper)
    if ust.st_mode != rst.st_mode:
        return False
    return same_entry(str(change.upper), ust, proc_path(dir_fd, name), rst)


def same_entry(upper: str, ust: os.stat_result, real: str, rst: os.stat_result) -> bool:
    """Same mode, content and extended attributes."""
    return ust.st_mode == rst.st_mode and same_content(Path(upper), ust, Path(real), rst) \
        and content_xattrs(upper) == content_xattrs(real)


def changed_since(dir_fd: int, name: str, since_ns: int) -> bool:
    """True when ``name`` or anything below it may have changed after ``since_ns``."""
    return any(may_follow(st.st_ctime_ns, since_ns) for st in walk_stats(dir_fd, name))


def _plan_prune(plan: Plan, ctx: _Context, step: Step, change: Change, dir_fd: int,
                name: str) -> None:
    """Remove the real entries an opaque directory hides (those absent from upper)."""
    since = ctx.merged_birth(change.path / "-", change.upper / "-")  # older copies were dropped
    try:
        fd = open_dir_at(dir_fd, name, change.path.parent)
    except OSError:
        return  # no real directory there: nothing hidden to remove
    try:
        for child in sorted(set(os.listdir(fd)) - _live_names(change.upper)):
            _prune_one(plan, ctx, step, change, fd, child, since)
    finally:
        os.close(fd)


def _prune_one(plan: Plan, ctx: _Context, step: Step, change: Change, fd: int, child: str,
               since: int) -> None:
    path = change.path / child
    kept = str(path) if ctx.excluded(path) else _excluded_below(ctx, fd, child, str(path))
    if kept is not None:
        plan.skipped.append(Path(kept))
        plan.incomplete.add(change.path)
    elif not ctx.force and changed_since(fd, child, since):
        plan.conflicts.append(PathIssue(path, "changed outside the sandbox after the sandbox "
                                              "replaced its directory"))
        plan.incomplete.add(change.path)
    else:
        plan.steps.append(Step("remove", step.layer, str(path), None))


def _excluded_below(ctx: _Context, dir_fd: int, name: str, path: str) -> str | None:
    """The first excluded path below the real entry ``name`` (at ``path``), which a step
    would remove with everything in it: what ``exclude`` names, and what workspace keeps
    out itself, is never written, a deletion deeper below included (attack pass 24)."""
    reaches = getattr(ctx.excluded, "reaches", None)
    if reaches is not None and not reaches(path):
        return None
    for rel, _ in walk_entries(dir_fd, name):
        if rel and ctx.excluded(f"{path}/{rel}"):
            return f"{path}/{rel}"
    return None


def _live_names(upper: Path) -> set[str]:
    names = set()
    for entry in os.scandir(upper):
        if not is_whiteout(Path(entry.path), entry.stat(follow_symlinks=False)):
            names.add(entry.name)
    return names


def withhold(plan: Plan, paths: Sequence[Path], all_changes: list[Change]) -> Plan:
    """``plan`` with ``paths`` (files) left pending, as if they had been excluded: what a
    commit learns only after planning (work-tree files that stay on a side branch)."""
    if not paths:
        return plan
    held = {str(p) for p in paths}
    already = set(plan.skipped)
    plan.steps = [s for s in plan.steps if s.path not in held]
    plan.conflicts = [i for i in plan.conflicts if str(i.path) not in held]
    plan.skipped.extend(p for p in paths if p not in already)
    return _hold_opaque(plan, all_changes, {str(c.path) for c in all_changes if c.opaque})


def _hold_opaque(plan: Plan, all_changes: list[Change], opaque: set[str]) -> Plan:
    """Keep upper copies inside an opaque directory that is not wholly committed.

    Moving a child out of such a directory would make the overlay hide its real
    copy: the sandbox's view must not change under a partial commit.
    """
    if not opaque:
        return plan
    stepped = {s.path for s in plan.steps}
    unfinished = {str(c.path) for c in all_changes} - stepped
    unfinished |= {str(p) for p in plan.incomplete}
    held = {a for u in unfinished for a in (u, *ancestors(u)) if a in opaque}
    if held:
        plan.steps = [_keep(s, held) for s in plan.steps]
    return plan


def _keep(step: Step, held: set[str]) -> Step:
    if step.upper is not None and (step.path in held or _under(step.path, held)):
        return replace(step, keep_upper=True)
    return step
