"""Commit an agent's git history through git, never file by file.

Order, so that no crash leaves a half state: the work tree first (the ordinary
file commit, ``.git`` excluded); then the objects the sandbox's refs need (one
pack, indexed by git); then each ref moved with compare-and-swap
(``update-ref REF NEW OLD``); then the index, rebuilt by git with a two-tree
``read-tree -m`` from the old HEAD commit to the new one. A branch the user
moved since the sandbox started from it is never overwritten: the agent's
commits go to ``workspace/<session>/<branch>`` and the user is told how to
merge them; the files of those commits stay out of the work tree (they are on
that branch), so work tree, index and HEAD agree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from manager.changes.model import Change
from manager.commit import reflogs
from manager.fs.regular import open_regular
from manager.git import nested
from manager.git import view as gitview
from manager.git.plumbing import Git
from manager.git.plumbing import GitError
from manager.git.plumbing import Repo
from manager.git.plumbing import discover
from manager.git.view import SYMBOLIC
from manager.git.view import RefChange
from manager.git.view import symbolic_target

ZERO = "0" * 40


@dataclass
class RefPlan:
    change: RefChange
    base: str | None          # the value the sandbox's ref started from (its reflog), if known
    divert_to: str | None = None

    @property
    def ref(self) -> str:
        return self.change.ref


@dataclass
class HistoryResult:
    created: list[str] = field(default_factory=list)          # "branch feature at abc1234"
    moved: list[str] = field(default_factory=list)            # "main: abc1234 -> def5678"
    diverted: list[tuple[str, str]] = field(default_factory=list)   # (ref, side branch)
    deleted: list[str] = field(default_factory=list)
    stashed: int = 0
    index_rebuilt: bool = False
    problems: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        return {"created": self.created, "moved": self.moved, "diverted": [list(d) for d in self.diverted],
                "deleted": self.deleted, "stashed": self.stashed,
                "index_rebuilt": self.index_rebuilt, "problems": self.problems}


@dataclass
class History:
    repo: Repo
    upper_git: Path
    session_id: str
    plans: list[RefPlan]
    head_ref: str | None          # the real branch HEAD names (refs/heads/X), None if detached
    sandbox_head: str | None      # the sandbox's HEAD when the agent switched ("ref: X" or an id)
    kept: list[Path] = field(default_factory=list)   # work-tree paths kept on a side branch
    flagged: list[Path] = field(default_factory=list)   # config, hooks/...: applied only if named
    changes: list[Change] = field(default_factory=list)  # everything under .git
    since: float = 0.0            # the session's start: later reflog entries are the user's

    @property
    def git(self) -> Git:
        return Git(self.repo)

    @property
    def reader(self) -> Git:
        return gitview.sandbox_git(self.git, self.upper_git)


def prepare(project: Path, git_changes: list[Change], session_id: str,
            since: float = 0.0) -> History | None:
    """The sandbox's git history to apply (None outside a plain git work tree)."""
    repo = discover(project)
    if repo is None or not git_changes or repo.git_dir != project / ".git":
        return None
    view = gitview.read(project, git_changes, [])
    upper_git = _upper_git(git_changes[0], repo.git_dir)
    git = Git(repo)
    head_ref = _symbolic_head(repo.git_dir / "HEAD")
    sandbox_head = _head_value(upper_git / "HEAD") if view.head else None
    plans = [RefPlan(r, _base(repo.git_dir, upper_git, r)) for r in view.refs]
    history = History(repo, upper_git, session_id, plans, head_ref, sandbox_head,
                      flagged=[c.path for c in view.flagged], changes=git_changes, since=since)
    for plan in plans:
        real_now = git.rev(plan.ref)
        if _needs_divert(plan, real_now):
            plan.divert_to = side_branch(plan.ref, session_id)
    return history


def internals(git_dir: Path, git_changes: list[Change], keep: list[Path]) -> list[Path]:
    """The top-level entries under ``.git`` the sandbox changed, but for ``keep``: never
    committed as files (git applies what they mean), dropped once applied."""
    names = {c.path.relative_to(git_dir).parts[0] for c in git_changes if c.path != git_dir}
    names -= set(nested.NESTED)       # others' git dirs: committed as files (git.nested)
    chosen = [git_dir / n for n in sorted(names)]
    return [p for p in chosen if not any(k == p or p in k.parents for k in keep)]


def _upper_git(change: Change, git_dir: Path) -> Path:
    upper = change.upper
    for _ in change.path.relative_to(git_dir).parts:
        upper = upper.parent
    return upper


def _symbolic_head(path: Path) -> str | None:
    return symbolic_target(_head_value(path))


def _head_value(path: Path) -> str | None:
    """HEAD as "ref: BRANCH", or the object id of a detached HEAD."""
    try:
        text = path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if text.startswith("ref:"):
        return SYMBOLIC + text[4:].strip()
    return text if len(text) >= 40 else None


def _base(git_dir: Path, upper_git: Path, change: RefChange) -> str | None:
    """What the sandbox's ref was before the agent changed it: the old value of the first
    reflog line the sandbox appended (its log is the real log as copied, plus its own)."""
    if change.old is None or change.symbolic:
        return None
    upper_log = gitview.reflog(upper_git, change.ref)
    real_log = gitview.reflog(git_dir, change.ref)
    shared = 0
    while shared < min(len(upper_log), len(real_log)) and upper_log[shared] == real_log[shared]:
        shared += 1
    added = upper_log[shared:]
    return added[0].split(b" ", 1)[0].decode() if added else None


def _needs_divert(plan: RefPlan, real_now: str | None) -> bool:
    change = plan.change
    if change.new is None or real_now == change.new or change.ref == "refs/stash" \
            or change.symbolic:
        return False
    if change.old is None:                      # created in the sandbox
        return real_now is not None
    if plan.base is not None:
        return real_now != plan.base
    return real_now != change.old or not change.fast_forward


def side_branch(ref: str, session_id: str) -> str:
    name = ref.removeprefix("refs/heads/").removeprefix("refs/tags/").removeprefix("refs/")
    kind = "tags" if ref.startswith("refs/tags/") else "heads"
    return f"refs/{kind}/workspace/{session_id}/{name}"


def committed_paths(history: History, worktree: list[Change]) -> list[Path]:
    """Work-tree paths of the diverted HEAD branch's commits whose sandbox content is
    exactly what those commits hold: they stay on the side branch, out of the work tree."""
    plan = next((p for p in history.plans if p.ref == history.head_ref and p.divert_to), None)
    if plan is None or plan.change.new is None:
        return []
    reader = history.reader
    start = plan.base or plan.change.old or ""
    text = reader.run("diff-tree", "-r", "-z", "--name-only", "--no-renames", start,
                      plan.change.new).stdout
    names = {os.fsdecode(n) for n in text.split(b"\0") if n}
    project = history.repo.worktree
    candidates = [c for c in worktree if str(c.path.relative_to(project)) in names]
    return [c.path for c in candidates if _matches_commit(reader, plan.change.new, c, project)]


def _matches_commit(reader: Git, commit: str, change: Change, project: Path) -> bool:
    rel = str(change.path.relative_to(project))
    listed = reader.run("ls-tree", "-z", commit, "--", rel).stdout.split(b"\0")[0]
    if change.new_type is None:                 # deleted in the sandbox
        return not listed
    if not listed or not change.upper.is_file() or change.upper.is_symlink():
        return False
    blob = listed.split(b"\t", 1)[0].split()[2].decode()
    try:   # git reads our descriptor: the inode proven a regular file, never a device
        fd = open_regular(change.upper)
    except OSError:
        return False
    try:
        return reader.out("hash-object", "--no-filters", f"/proc/{os.getpid()}/fd/{fd}") == blob
    finally:
        os.close(fd)


def divert_head_on_conflict(history: History, conflicted: list[Path]) -> None:
    """A file the agent's commits touched that conflicts in the work tree: moving the
    branch would leave HEAD and the work tree disagreeing, so its commits go aside."""
    plan = next((p for p in history.plans if p.ref == history.head_ref and not p.divert_to), None)
    if plan is None or plan.change.new is None or plan.change.old is None or not conflicted:
        return
    project = history.repo.worktree
    text = history.reader.run("diff-tree", "-r", "-z", "--name-only", plan.change.old,
                              plan.change.new).stdout
    names = {os.fsdecode(n) for n in text.split(b"\0") if n}
    if any(str(p.relative_to(project)) in names for p in conflicted if project in p.parents):
        plan.divert_to = side_branch(plan.ref, history.session_id)


def apply(history: History) -> HistoryResult:
    """Objects, then refs (compare-and-swap), then HEAD and the index."""
    result = HistoryResult()
    git = history.git
    head_before = git.rev("HEAD")
    _copy_objects(history)
    for plan in history.plans:
        _apply_ref(git, plan, history, result)
    _apply_head(history)
    reflogs.sync(history.repo.git_dir, history.upper_git, history.since)
    head_after = git.rev("HEAD")
    if head_before and head_after and head_before != head_after:
        try:
            git.run("read-tree", "-m", "-i", head_before, head_after)
            git.run("update-index", "-q", "--refresh", check=False)
            result.index_rebuilt = True
        except GitError as exc:
            result.problems.append(f"the index was not rebuilt ({exc}); run `git reset` to "
                                   "match it to HEAD")
    return result


def _apply_head(history: History) -> None:
    """HEAD names what it names in the sandbox: its branch, once applied as the sandbox has
    it, or the detached commit (unless the branch HEAD names went aside)."""
    head = history.sandbox_head
    if head is None:
        return
    target = symbolic_target(head)
    if target is not None:
        if _applied(history, target):
            history.git.run("symbolic-ref", "-m", reflogs.OURS, "HEAD", target)
    elif not any(p.ref == history.head_ref and p.divert_to for p in history.plans):
        history.git.run("update-ref", "--no-deref", "-m", reflogs.OURS, "HEAD", head)


def _applied(history: History, ref: str) -> bool:
    """The sandbox's HEAD branch exists for real now, as the sandbox has it."""
    if any(p.ref == ref and p.divert_to for p in history.plans):
        return False
    return history.git.rev(ref) is not None


def _copy_objects(history: History) -> None:
    """One pack of what the sandbox's refs reach and the real refs do not, indexed by git."""
    if not (history.upper_git / "objects").is_dir():
        return
    wanted = [p.change.new for p in history.plans if p.change.new and not p.change.symbolic]
    wanted += _stash_entries(history)
    if history.sandbox_head and symbolic_target(history.sandbox_head) is None:
        wanted.append(history.sandbox_head)
    # What the sandbox's reflog entries name and the real store lacks (fsck checks them).
    logged = reflogs.object_ids(history.repo.git_dir, history.upper_git)
    missing = [sha for sha, has in history.git.has_objects(sorted(logged)).items() if not has]
    wanted += [sha for sha, has in history.reader.has_objects(missing).items() if has]
    if not wanted:
        return
    real = [sha for _, sha in history.git.refs("refs/")]
    revs = "".join(f"{sha}\n" for sha in wanted) + "--not\n" + "".join(f"{s}\n" for s in real)
    pack = history.reader.run("pack-objects", "--revs", "--stdout", "-q",
                              input=revs.encode()).stdout
    history.git.run("index-pack", "--stdin", "--fix-thin", input=pack)


def _stash_entries(history: History) -> list[str]:
    """Stash commits the sandbox added, oldest first (from its stash reflog)."""
    added = gitview.stash_appended(history.repo.git_dir, history.upper_git)
    return [line.split(b" ", 2)[1].decode() for line in added if line.count(b" ") >= 2]


def real_value(git: Git, ref: str) -> str | None:
    """A real ref's value as the view reads it: "ref: TARGET" for a symbolic ref."""
    proc = git.run("symbolic-ref", "-q", ref, check=False)
    if proc.returncode == 0:
        return SYMBOLIC + proc.stdout.decode().strip()
    return git.rev(ref)


def _apply_ref(git: Git, plan: RefPlan, history: History, result: HistoryResult) -> None:
    change = plan.change
    if change.ref == "refs/stash" and real_value(git, change.ref) != change.old:
        result.stashed += _apply_stash(git, history)   # the user stashed too: add ours on top
        return
    if change.ref == "refs/stash":
        result.stashed += len(_stash_entries(history))
    try:
        if change.symbolic:
            _apply_symbolic(git, change, result)
        elif change.new is None:
            real_now = git.rev(change.ref)
            if real_now is not None and real_now == change.old:
                git.run("update-ref", "--no-deref", "-d", change.ref, real_now)
                result.deleted.append(f"{change.short_name} (was {real_now[:7]})")
        elif plan.divert_to:
            git.run("update-ref", "-m", reflogs.OURS, plan.divert_to, change.new, ZERO)
            result.diverted.append((change.ref, plan.divert_to))
        else:
            _move(git, change, result)
    except GitError as exc:
        result.problems.append(f"{change.ref} not moved: {exc}")


def _move(git: Git, change: RefChange, result: HistoryResult) -> None:
    assert change.new is not None
    real_now = git.rev(change.ref)
    if real_now == change.new:
        return
    git.run("update-ref", "--no-deref", "-m", reflogs.OURS, change.ref, change.new,
            real_now or ZERO)
    if real_now is None:
        result.created.append(f"{change.kind} {change.short_name} at {change.new[:7]}")
    else:
        result.moved.append(f"{change.short_name}: {real_now[:7]} -> {change.new[:7]}")


def _apply_symbolic(git: Git, change: RefChange, result: HistoryResult) -> None:
    """A symbolic ref is changed as one, never through the ref it names (deleting
    ``origin/HEAD`` must not delete ``origin/main``)."""
    now = real_value(git, change.ref)
    if now == change.new:
        return
    if now != change.old:
        result.problems.append(f"{change.ref} not changed: it changed outside the sandbox")
        return
    target = symbolic_target(change.new)
    if change.new is None:
        git.run("symbolic-ref", "--delete", change.ref)
        result.deleted.append(f"{change.short_name} (was -> {symbolic_target(change.old)})")
        return
    if target is not None:
        git.run("symbolic-ref", "-m", reflogs.OURS, change.ref, target)
    else:
        git.run("update-ref", "--no-deref", "-m", reflogs.OURS, change.ref, change.new)
    shown = target or change.new[:7]
    if change.old is None:
        result.created.append(f"{change.kind} {change.short_name} -> {shown}")
    else:
        result.moved.append(f"{change.short_name}: -> {shown}")


def _apply_stash(git: Git, history: History) -> int:
    count = 0
    for line in gitview.stash_appended(history.repo.git_dir, history.upper_git):
        head, _, message = line.partition(b"\t")
        fields = head.split(b" ")
        if len(fields) >= 2:
            git.run("stash", "store", "-q", "-m", message.decode(errors="replace"),
                    fields[1].decode())
            count += 1
    return count
