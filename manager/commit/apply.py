"""Commit a session's changes to the real filesystem, or discard them.

The caller holds the session's exclusive lock and has stopped the engine, so
no upper directory is mounted. A commit plans (:mod:`manager.commit.plan`), writes the
plan to a journal, carries it out (:mod:`manager.commit.steps`), then tidies the upper
directories and removes the journal. A commit that finds a journal first
finishes it: the same steps, skipping those already done.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from manager.changes import seen
from manager.changes.model import Change
from manager.changes.model import Layer
from manager.changes.model import holds_a_mask
from manager.changes.model import is_within
from manager.changes.model import read_changes
from manager.changes.model import select
from manager.changes.model import select_units
from manager.commit import journal
from manager.commit import judged
from manager.commit import trees
from manager.commit.btime import may_follow
from manager.commit.exclude import compile_patterns
from manager.commit.journal import Journal
from manager.commit.journal import Step
from manager.commit.plan import PathIssue
from manager.commit.plan import Plan
from manager.commit.plan import fingerprints
from manager.commit.plan import make_plan
from manager.commit.plan import same_entry
from manager.commit.plan import with_parents
from manager.commit.safefs import DirChain
from manager.commit.safefs import lstat_at
from manager.commit.safefs import proc_path
from manager.commit.safefs import rel_parts
from manager.commit.safefs import remove_at
from manager.commit.safefs import walk_stats
from manager.commit.steps import Executor
from manager.commit.steps import Outcome
from manager.commit.trees import Census
from manager.errors import WorkspaceError
from manager.fs import longpath


@dataclass
class CommitResult:
    # Strings: a commit of 10,000 new files would spend more making Paths than moving them.
    applied_paths: list[str] = field(default_factory=list)
    conflicts: list[PathIssue] = field(default_factory=list)  # left alone; pending
    skipped: list[Path] = field(default_factory=list)         # excluded; pending
    refused: list[PathIssue] = field(default_factory=list)    # special, not allowed; pending
    errors: list[PathIssue] = field(default_factory=list)     # failed; pending
    resumed: list[Path] = field(default_factory=list)         # finished from an interrupted commit
    notes: list[PathIssue] = field(default_factory=list)      # committed, not quite as inside

    @property
    def applied(self) -> list[Path]:
        return [Path(p) for p in self.applied_paths]

    @property
    def ok(self) -> bool:
        return not self.conflicts and not self.errors and not self.refused

    def as_json(self) -> dict[str, object]:
        return {
            "applied": list(self.applied_paths),
            "resumed": [str(p) for p in self.resumed],
            "conflicts": [c.as_json() for c in self.conflicts],
            "skipped": [str(p) for p in self.skipped],
            "refused": [r.as_json() for r in self.refused],
            "errors": [e.as_json() for e in self.errors],
            "notes": [n.as_json() for n in self.notes],
        }


Progress = Callable[[int, int, int], None]    # (steps done, steps, bytes written)
# Asked of the changes as a commit reads them, before it applies any: it raises to refuse.
# The caller's check of what review showed must be of these, read this way, not of a
# second read (review's own reuses what its cache says is unchanged).
Vet = Callable[[list[Change]], None]


def commit(session_dir: Path, layers: Sequence[Layer], project: Path,
           paths: Sequence[Path] = (), *, force: bool = False,
           exclude: Sequence[str] = (), progress: Progress | None = None,
           allow_special: bool = False, vet: Vet | None = None, kept: Sequence[str] = (),
           units: bool = False) -> CommitResult:
    """Apply the changes at or below ``paths`` (all when empty) to the real filesystem;
    ``units``: exactly the changes at ``paths`` (``model.select_units``: commit -p's units);
    ``kept``: the paths kept out (state, hidden), above which a directory's mode is never
    applied, as review never shows it (``holds_a_mask``)."""
    result = CommitResult()
    resume(session_dir, project, result)
    collector = trees.Collector(project)
    all_changes = [c for c in read_changes(list(layers), project, collapse=collector)
                   if not holds_a_mask(c, kept)]
    excluded = compile_patterns(exclude, project)
    all_changes, whole = trees.settle(all_changes, collector.trees, paths, excluded)
    chosen = select_units(all_changes, list(paths)) if units else \
        select(all_changes, list(paths))
    printed = vetted(all_changes, chosen, whole, vet)
    plan = make_plan(layers, all_changes, chosen, excluded=excluded, force=force,
                     allow_special=allow_special, seen=seen.Seen(session_dir), trees=whole,
                     fingerprints=printed)
    carry_out(session_dir, layers, all_changes, plan, result, force=force, progress=progress)
    return result


def vetted(all_changes: list[Change], chosen: list[Change], whole: dict[str, Census],
           vet: Vet | None) -> dict[str, str]:
    """The fingerprints of what commit will apply (``chosen``, the new parents it needs,
    each entry of a tree step), taken first; then ``vet`` is asked of all of it, as this
    commit read it (attack pass 22: handed the collapsed trees and the named paths only,
    it missed an entry added in a new directory and a new parent's mode)."""
    applying = with_parents(chosen, all_changes)
    printed = fingerprints(applying, whole)
    if vet is not None:
        vet(trees.expanded(applying, whole))
    return printed


def resume(session_dir: Path, project: Path, result: CommitResult) -> None:
    """Finish a commit that was interrupted, before anything is read for a new one."""
    interrupted = journal.read(session_dir)
    if interrupted is not None:
        _resume(session_dir, interrupted, project, result)


def carry_out(session_dir: Path, layers: Sequence[Layer], all_changes: list[Change],
              plan: Plan, result: CommitResult, *, force: bool,
              progress: Progress | None = None) -> None:
    """Journal ``plan``, take its steps, tidy the upper directories; record it in ``result``."""
    result.conflicts.extend(plan.conflicts)
    result.refused.extend(plan.refused)
    result.skipped.extend(plan.skipped)
    if not plan.steps:
        return
    started = journal.write(session_dir, Journal(journal.new_token(), list(layers),
                                                 plan.steps, force))
    outcome = _execute(started, check=None, progress=progress, trees=plan.trees)
    applied = list(_applied_paths(outcome.applied, plan))
    result.applied_paths.extend(applied)
    seen.forget(session_dir, applied)   # real now: no evidence
    result.notes.extend(owner_notes(all_changes, result.applied_paths))
    _record_failures(result, outcome)
    tidy_upper(layers, [c.upper_path for c in all_changes], _moved_uppers(outcome))
    journal.remove(session_dir)


def _applied_paths(applied: list[Step], plan: Plan) -> Iterator[str]:
    """Each applied path, those a tree step carried too (reported one by one, as ever)."""
    for step in applied:
        yield step.path
        if step.action == "tree":
            yield from (f"{step.path}/{rel}" for rel, _ in plan.trees[step.path].entries)


def owner_notes(changes: Sequence[Change], applied: Sequence[str]) -> list[PathIssue]:
    """Applied entries that had another owner inside than an ordinary user can give them."""
    if os.geteuid() == 0:
        return []   # root gives every entry its owner from inside
    own = (os.geteuid(), os.getegid())
    owners = {c.real_path: c.owner for c in changes if c.owner is not None and c.owner != own}
    return [PathIssue(Path(path), f"committed as yours: inside it belongs to {uid}:{gid}, and only "
                            "root can give a file to another user")
            for path in applied if (found := owners.get(path)) is not None
            for uid, gid in [found]]


def _execute(plan: Journal, check: Callable[[Executor, Step, int, str], str | None] | None,
             progress: Progress | None = None, trees: dict[str, Census] | None = None) -> Outcome:
    executor = Executor(plan.layers, plan.token, check)
    executor.progress = progress
    executor.trees = trees or {}
    try:
        if check is not None:   # a fresh commit's new token names no temporary entry yet
            remove_strays(executor, plan.steps)
        return executor.run(plan.steps)
    finally:
        executor.close()


def _record_failures(result: CommitResult, outcome: Outcome) -> None:
    result.conflicts.extend(PathIssue(Path(s.path), why) for s, why in outcome.conflicts)
    result.errors.extend(PathIssue(Path(s.path), why) for s, why in outcome.errors)


def _moved_uppers(outcome: Outcome) -> list[str]:
    """Upper entries whose changes are now real (so they are no longer pending)."""
    return [s.upper for s in (*outcome.applied, *outcome.done)
            if s.upper is not None and not s.keep_upper]


# -- resuming -------------------------------------------------------------------


def _resume(session_dir: Path, interrupted: Journal, project: Path,
            result: CommitResult) -> None:
    outcome = _execute(interrupted, _resume_check(interrupted))
    result.resumed.extend(Path(s.path) for s in (*outcome.done, *outcome.applied))
    _record_failures(result, outcome)
    # What else is pending is not in the journal: read it afresh.
    still = [c.upper_path for c in read_changes(interrupted.layers, project)]
    tidy_upper(interrupted.layers, still, _moved_uppers(outcome))
    journal.remove(session_dir)


def _resume_check(interrupted: Journal) -> Callable[[Executor, Step, int, str], str | None]:
    """A step is done when its upper entry is gone or the real path already matches it.

    Anything else that changed after the journal was written was changed by
    someone else (this commit only ever publishes finished entries), so it is a
    conflict unless the commit was forced.
    """
    def check(executor: Executor, step: Step, dir_fd: int, name: str) -> str | None:
        state = _resume_state(executor, step, dir_fd, name)
        if state != "changed":
            return state
        if interrupted.force or not _changed_since(dir_fd, name, interrupted.started_ns):
            return None
        return "changed outside the sandbox while the commit was interrupted"
    return check


def _resume_state(executor: Executor, step: Step, dir_fd: int, name: str) -> str | None:
    rst = lstat_at(dir_fd, name)
    if step.action == "remove":
        return "done" if rst is None else "changed"
    try:
        up_fd, up_name = executor.upper_at(step)
    except FileNotFoundError:
        return _upper_gone(step, rst)
    ust = lstat_at(up_fd, up_name)
    if ust is None:
        return _upper_gone(step, rst)
    if step.action == "tree":   # both there: a copy renamed in, or made outside meanwhile
        return None if rst is None else trees.LEFT
    if rst is None or (step.action == "dir" and stat.S_ISDIR(rst.st_mode)):
        return None
    if same_entry(proc_path(up_fd, up_name), ust, proc_path(dir_fd, name), rst):
        return "done"
    return "changed"


def _upper_gone(step: Step, rst: os.stat_result | None) -> str:
    """A resumed step whose upper entry is gone: done when the real entry is the copy it
    made (the commit removes an upper copy once it is in place); else something else
    removed it while the commit was interrupted: left to the fresh plan, and not among what
    the commit finished, so the review record keeps it and the check refuses it (attack
    pass 26's lead: counted done, it left the record, and a prune applied alone)."""
    if step.action != "write" or step.judged is None or judged.copied(rst, step.judged):
        return "done"
    return trees.LEFT


def _changed_since(dir_fd: int, name: str, since_ns: int) -> bool:
    return any(may_follow(st.st_ctime_ns, since_ns) for st in walk_stats(dir_fd, name))


def remove_strays(executor: Executor, steps: Iterable[Step]) -> None:
    """Delete temporary entries an interrupted commit left beside its destinations."""
    dirs: set[tuple[int, tuple[str, ...]]] = set()
    for step in steps:
        parts = rel_parts(executor.layers[step.layer].target, step.path)
        dirs.add((step.layer, parts[:-1]))
        if step.action == "dir":
            dirs.add((step.layer, parts))
    for layer, parts in sorted(dirs):
        _remove_strays_in(executor.real[layer], parts, executor.temp_prefix())


def _remove_strays_in(chain: DirChain, parts: tuple[str, ...], prefix: str) -> None:
    try:
        dir_fd = chain.fd(parts)
        for name in os.listdir(dir_fd):
            if name.startswith(prefix):
                remove_at(dir_fd, name)
    except OSError:
        pass  # the directory is gone or unreadable: nothing of ours can be in it


# -- discarding -----------------------------------------------------------------


def discard(session_dir: Path, layers: Sequence[Layer], project: Path,
            paths: Sequence[Path] = (), progress: Progress | None = None,
            guard: bool = True) -> list[Change]:
    """Drop the changes at or below ``paths`` (all when empty); return what was dropped.
    ``guard``: refuse an entry whose real one a replaced directory still hides (the user's
    discard; a commit dropping what git applied, after it applied it, must not stop)."""
    if journal.read(session_dir) is not None:
        raise WorkspaceError("an interrupted commit is unfinished; discarding now could lose "
                             "half of it", hint="run `workspace commit` to finish it first")
    all_changes = read_changes(list(layers), project)
    chosen = select(all_changes, list(paths)) if paths else all_changes
    if guard:
        _refuse_hiding_real(all_changes, chosen)
    size = sum(_size(c.upper) for c in chosen) if progress is not None else 0
    if not paths:
        for layer in layers:
            _empty_dir(layer.upper)
    else:
        _remove_uppers(layers, _topmost([c.upper for c in chosen]))
        tidy_upper(layers, [c.upper for c in all_changes], [c.upper for c in chosen])
    seen.forget(session_dir, [c.real_path for c in chosen] if paths else None)
    if progress is not None:
        progress(len(chosen), len(chosen), size)
    return chosen


def _refuse_hiding_real(all_changes: list[Change], chosen: list[Change]) -> None:
    """Nothing below a directory the sandbox replaced (opaque) is dropped alone while a real
    entry is there: the directory still hides it, so commit would delete it -- a change
    the user declined would become a deletion (attack pass 24)."""
    taken = {c.real_path for c in chosen}
    opaque = [c.real_path for c in all_changes if c.opaque and c.real_path not in taken]
    if not opaque:
        return
    for change in chosen:
        above = next((o for o in opaque if is_within(change.real_path, o)
                      and o != change.real_path), None)
        if above is not None and os.path.lexists(change.real_path):
            raise WorkspaceError(
                f"{change.real_path} is inside {above}, which the sandbox replaced with "
                "everything in it: dropping it alone would make commit delete the real one; "
                "nothing was discarded",
                hint=f"discard or commit {above} as a whole, or change the file in the sandbox")


def _size(path: Path) -> int:
    try:
        st = longpath.lstat(str(path))
    except OSError:
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


def _empty_dir(root: Path) -> None:
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        for name in os.listdir(fd):
            remove_at(fd, name)
    finally:
        os.close(fd)


def _topmost(uppers: Iterable[Path | str]) -> list[Path]:
    # In path order a directory's entries follow it: one look back, not up every ancestor.
    top: list[str] = []
    for upper in sorted({str(u) for u in uppers}, key=lambda t: t.replace("/", "\0")):
        if not top or not is_within(upper, top[-1]):
            top.append(upper)
    return [Path(u) for u in top]


def _remove_uppers(layers: Sequence[Layer], uppers: list[Path]) -> None:
    chains = [DirChain(layer.upper) for layer in layers]
    try:
        for upper in uppers:
            index, parts = _locate(layers, upper)
            with contextlib.suppress(FileNotFoundError):  # already moved into the real tree
                remove_at(chains[index].fd(parts[:-1]), parts[-1])
    finally:
        for chain in chains:
            chain.forget(())


def _locate(layers: Sequence[Layer], upper: Path) -> tuple[int, tuple[str, ...]]:
    text = str(upper)
    for index, layer in enumerate(layers):
        if is_within(text, layer.upper) and text != str(layer.upper):
            return index, rel_parts(layer.upper, text)
    raise ValueError(f"{upper} is in no layer")


# -- tidying --------------------------------------------------------------------


def tidy_upper(layers: Sequence[Layer], all_uppers: Iterable[Path | str],
               gone: Iterable[Path | str]) -> None:
    """Remove upper directories that no longer hold anything pending.

    ``gone`` are upper entries that stopped being pending (committed or
    dropped). Their ancestor directories are removed, whole, when neither they
    nor anything below them is still pending: what remains in them are copy-ups
    identical to the real files and whiteouts of paths that no longer exist.
    Strings, not Paths: this runs over every entry of large uppers.
    """
    gone_set = {str(u) for u in gone}
    pending = {str(u) for u in all_uppers} - gone_set
    roots = {str(layer.upper) for layer in layers}
    keep = set(pending)
    for upper in pending:
        keep.update(_ancestors(upper, roots, keep))
    doomed: set[str] = set()
    for upper in gone_set:
        parent = os.path.dirname(upper)
        if parent in gone_set and parent not in keep:
            continue   # its directory goes whole (a tree of 10,000: 100 entries to sort, not all)
        if upper not in keep:
            doomed.add(upper)
        doomed.update(d for d in _ancestors(upper, roots, doomed) if d not in keep)
    _remove_uppers(layers, _topmost(doomed))


def _ancestors(path: str, roots: set[str], known: set[str]) -> Iterator[str]:
    """The directories above ``path``, up to (not including) its layer's root or the
    first one in ``known`` (whose own ancestors are known too: each is climbed once)."""
    parent = os.path.dirname(path)
    while parent not in roots and parent not in known and parent != os.path.dirname(parent):
        yield parent
        parent = os.path.dirname(parent)
