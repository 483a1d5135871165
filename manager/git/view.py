"""Changes under a project's ``.git``, read as what they mean to git.

An agent's ``git commit`` in the sandbox writes object files, a log line, the
index and a ref: review shows "1 new commit on main" instead. Refs are resolved
as the sandbox sees them (its loose refs over the real ones, its packed-refs if
it rewrote them); commits are listed with the sandbox's new objects borrowed
next to the real store, so nothing is written anywhere. Files that make git run
programs or change what it tracks (``config``, ``hooks/``, ``info/``,
``.gitmodules``) are flagged as security-relevant.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from manager.changes.model import Change
from manager.changes.model import is_opaque
from manager.changes.model import is_whiteout
from manager.git import nested
from manager.git.plumbing import Git
from manager.git.plumbing import GitError
from manager.git.plumbing import discover
from manager.record import Record
from manager.record import Value

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.record
if TYPE_CHECKING:
    from typing import Final

MAX_COMMITS = 20
# Under .git: what can make git run a program or change what it sees.
FLAGGED_DIRS = ("hooks", "info")
FLAGGED_FILES = ("config", "commondir", "gitdir")
# ... but for what only serves others: the ref list repack writes for dumb-HTTP clients.
UNFLAGGED = (("info", "refs"),)


class Commit(Value):
    __slots__ = ("short", "subject")
    short: Final[str]
    subject: Final[str]

    def __init__(self, short: str, subject: str) -> None:
        self.short = short
        self.subject = subject


SYMBOLIC = "ref: "       # a symbolic ref's value: "ref: refs/remotes/origin/main"


def symbolic_target(value: str | None) -> str | None:
    """The ref a symbolic ref's value names (None for an object id, or no value)."""
    return value[len(SYMBOLIC):] if value is not None and value.startswith(SYMBOLIC) else None


class RefChange(Value):
    __slots__ = ("ref", "old", "new", "commits", "more", "fast_forward")
    ref: Final[str]                  # refs/heads/main
    # Values are object ids, or "ref: TARGET" for symbolic refs (compared as their target).
    old: Final[str | None]           # the real value; None: created
    new: Final[str | None]           # the sandbox's value; None: deleted
    commits: Final[tuple[Commit, ...]]   # reachable from new, not from old (or any real ref)
    more: Final[int]                 # commits beyond MAX_COMMITS
    fast_forward: Final[bool]        # old is an ancestor of new

    def __init__(self, ref: str, old: str | None, new: str | None, commits: tuple[Commit, ...] = (),
                 more: int = 0, fast_forward: bool = True) -> None:
        self.ref = ref
        self.old = old
        self.new = new
        self.commits = commits
        self.more = more
        self.fast_forward = fast_forward

    @property
    def short_name(self) -> str:
        for prefix in ("refs/heads/", "refs/tags/", "refs/remotes/"):
            if self.ref.startswith(prefix):
                return self.ref[len(prefix):]
        return self.ref

    @property
    def symbolic(self) -> bool:
        return symbolic_target(self.old) is not None or symbolic_target(self.new) is not None

    @property
    def kind(self) -> str:
        if self.symbolic:
            return "symbolic ref"
        if self.ref.startswith("refs/heads/"):
            return "branch"
        if self.ref.startswith("refs/tags/"):
            return "tag"
        if self.ref == "refs/stash":
            return "stash"
        return "ref"


class GitView(Record):
    __slots__ = ("refs", "head", "stash_added", "flagged", "hidden")

    def __init__(self, refs: list[RefChange] | None = None, head: tuple[str, str] | None = None,
                 stash_added: int = 0, flagged: list[Change] | None = None,
                 hidden: list[Change] | None = None) -> None:
        self.refs = refs if refs is not None else []
        self.head = head                  # (real HEAD, sandbox HEAD) when it changed
        self.stash_added = stash_added
        self.flagged = flagged if flagged is not None else []
        self.hidden = hidden if hidden is not None else []   # objects, logs, index, ...

    @property
    def empty(self) -> bool:
        return not (self.refs or self.head or self.flagged or self.hidden)


def read(project: Path, git_changes: list[Change], worktree_changes: list[Change]) -> GitView:
    """What ``git_changes`` (under ``project/.git``) mean; ``.gitmodules`` is flagged too."""
    view = GitView()
    git_dir = project / ".git"
    gitmodules = project / ".gitmodules"
    view.flagged.extend(c for c in worktree_changes if c.real_path == str(gitmodules))
    if not git_changes:
        return view
    for change in git_changes:
        rel = change.path.relative_to(git_dir).parts
        if nested.is_nested(rel):        # a submodule's or worktree's own git dir
            (view.flagged if nested.is_flagged(rel) else view.hidden).append(change)
        elif rel and (rel[0] in FLAGGED_DIRS or rel[0] in FLAGGED_FILES) and rel not in UNFLAGGED:
            view.flagged.append(change)
        else:
            view.hidden.append(change)
    upper_git = _upper_root(git_changes[0], git_dir)
    repo = discover(project)
    if repo is None or upper_git is None or repo.git_dir != git_dir:
        return view
    git = Git(repo)
    view.refs = _ref_changes(git, repo.git_dir, upper_git)
    view.head = _head_change(repo.git_dir, upper_git)
    view.stash_added = _stash_added(repo.git_dir, upper_git)
    return view


def _upper_root(change: Change, git_dir: Path) -> Path | None:
    rel = change.path.relative_to(git_dir)
    upper = change.upper
    for _ in rel.parts:
        upper = upper.parent
    return upper if upper.is_dir() else None


def sandbox_git(git: Git, upper_git: Path) -> Git:
    """git reading the sandbox's new objects beside the real ones (never writing)."""
    objects = upper_git / "objects"
    if not objects.is_dir():
        return git
    return git.with_env(GIT_OBJECT_DIRECTORY=str(objects),
                        GIT_ALTERNATE_OBJECT_DIRECTORIES=str(git.repo.objects))


def _ref_changes(git: Git, git_dir: Path, upper_git: Path) -> list[RefChange]:
    real = sandbox_refs(git_dir, None)        # read as the sandbox's are: symbolic refs alike
    sandbox = sandbox_refs(git_dir, upper_git)
    reader = sandbox_git(git, upper_git)
    changes = []
    for ref in sorted(set(real) | set(sandbox)):
        old, new = real.get(ref), sandbox.get(ref)
        if old != new:
            changes.append(_describe(reader, ref, old, new))
    return changes


def sandbox_refs(git_dir: Path, upper_git: Path | None) -> dict[str, str]:
    """Every ref as the sandbox sees it: its loose refs over the real ones, then packed
    (the real ones alone when ``upper_git`` is None). Symbolic refs are "ref: TARGET"."""
    if upper_git is None:
        return {**_parse_packed(git_dir / "packed-refs"), **_loose_refs(git_dir / "refs", "refs")}
    packed_file = upper_git / "packed-refs"
    if _exists(packed_file):
        packed = {} if _is_whiteout(packed_file) else _parse_packed(packed_file)
    else:
        packed = _parse_packed(git_dir / "packed-refs")
    real_loose = _loose_refs(git_dir / "refs", "refs")
    hidden = _hidden_refs(upper_git / "refs", "refs", real_loose)
    loose = {ref: sha for ref, sha in real_loose.items() if ref not in hidden}
    loose.update(_loose_refs(upper_git / "refs", "refs"))
    # A deleted loose ref is gone unless the sandbox's packed-refs still has it.
    result = dict(packed)
    result.update(loose)
    return result


def _exists(path: Path) -> bool:
    return os.path.lexists(path)


def _is_whiteout(path: Path) -> bool:
    try:
        return is_whiteout(path, os.lstat(path))
    except OSError:
        return False


def _parse_packed(path: Path) -> dict[str, str]:
    refs: dict[str, str] = {}
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return refs
    for line in text.splitlines():
        if line and line[0] not in "#^":
            sha, _, ref = line.partition(" ")
            refs[ref] = sha
    return refs


def _ref_entries(directory: Path, prefix: str) -> Iterator[tuple[Path, str, os.stat_result]]:
    """Every entry below ``directory`` with its ref name and lstat; a loop, not recursion:
    the sandbox may have made refs/heads/a/a/a/... thousands deep."""
    todo = [(directory, prefix)]
    while todo:
        directory, prefix = todo.pop()
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            path, ref = directory / name, f"{prefix}/{name}"
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                todo.append((path, ref))
            yield path, ref, st


def _loose_refs(directory: Path, prefix: str) -> dict[str, str]:
    """Loose ref files below ``directory`` (whiteouts skipped; symbolic refs as "ref: X")."""
    refs: dict[str, str] = {}
    for path, ref, st in _ref_entries(directory, prefix):
        if stat.S_ISREG(st.st_mode) and not is_whiteout(path, st):
            value = path.read_text(errors="replace").strip()
            if value.startswith("ref:"):
                refs[ref] = SYMBOLIC + value[4:].strip()
            elif len(value) >= 40:
                refs[ref] = value
    return refs


def _hidden_refs(upper_dir: Path, prefix: str, real_loose: dict[str, str]) -> set[str]:
    """Real loose refs the sandbox deleted (whiteouts) or hid (opaque directories)."""
    hidden: set[str] = set()
    for path, ref, st in _ref_entries(upper_dir, prefix):
        if is_whiteout(path, st) or stat.S_ISREG(st.st_mode):
            hidden.update(r for r in real_loose if r == ref or r.startswith(ref + "/"))
        elif stat.S_ISDIR(st.st_mode) and is_opaque(path):
            hidden.update(r for r in real_loose if r.startswith(ref + "/"))
    return hidden


def _describe(git: Git, ref: str, old: str | None, new: str | None) -> RefChange:
    if new is None or symbolic_target(old) or symbolic_target(new):
        return RefChange(ref, old, new)
    exclude = [f"^{old}"] if old else ["--not", "--all"]
    try:
        text = git.run("log", "--no-show-signature", f"--max-count={MAX_COMMITS + 1}",
                       "--format=%h%x00%s", new, *exclude).stdout.decode(errors="replace")
        # Split at "\n" only: a subject may hold a "\r" (shown escaped, not cut there).
        commits = [Commit(*line.split("\0", 1)) for line in text.split("\n") if "\0" in line]
        count = int(git.out("rev-list", "--count", new, *exclude)) if len(commits) > MAX_COMMITS \
            else len(commits)
        forward = old is None or git.run("merge-base", "--is-ancestor", old, new,
                                         check=False).returncode == 0
    except GitError:
        return RefChange(ref, old, new, fast_forward=False)
    return RefChange(ref, old, new, tuple(commits[:MAX_COMMITS]), max(0, count - MAX_COMMITS),
                     forward)


def _head_change(git_dir: Path, upper_git: Path) -> tuple[str, str] | None:
    upper_head = upper_git / "HEAD"
    if not upper_head.is_file() or _is_whiteout(upper_head):
        return None
    old = _head_text(git_dir / "HEAD")
    new = _head_text(upper_head)
    return (old, new) if old != new else None


def _head_text(path: Path) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "?"
    return text[len("ref: refs/heads/"):] if text.startswith("ref: refs/heads/") else text[:12]


def _stash_added(git_dir: Path, upper_git: Path) -> int:
    upper_log = upper_git / "logs" / "refs" / "stash"
    if not upper_log.is_file() or _is_whiteout(upper_log):
        return 0
    return len(stash_appended(git_dir, upper_git))


def reflog(git_dir: Path, ref: str) -> list[bytes]:
    """A ref's reflog, a line an entry (none when it has no log)."""
    try:
        return (git_dir / "logs" / ref).read_bytes().splitlines()
    except OSError:
        return []


def stash_appended(git_dir: Path, upper_git: Path) -> list[bytes]:
    """Stash entries the sandbox added, oldest first: its log is the real one as copied,
    plus its own."""
    return reflog(upper_git, "refs/stash")[len(reflog(git_dir, "refs/stash")):]
