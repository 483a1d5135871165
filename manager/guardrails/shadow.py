"""The shadow store beside ``.git`` and snapshots of the project's current state.

Where: ``<git common dir>/workspace-checkpoints.git``, a bare repository of our
own. Why there and not under ``$XDG_STATE_HOME``: it lives and dies with the
repository (deleting or moving a clone takes its checkpoints along, nothing
dangles), it sits on the same filesystem as the objects it borrows, and linked
worktrees share it. Git never looks inside it: its refs are not under
``.git/refs`` or ``packed-refs``, so they never show in ``git log --all``,
``git branch -a``, ``for-each-ref``, IDEs, fetches or pushes, and the user's
``git gc`` neither reads nor prunes it.

It borrows the user's objects (``GIT_ALTERNATE_OBJECT_DIRECTORIES``, set per
call, never in a file, so the store also works after the repository moves) and
writes only its own. A snapshot is the state as a tree: ``git status`` on a
temporary index seeded from our last one (else the user's) says what changed
since, ``git add -A`` of just those paths, ``write-tree``; then the overlay's
pending changes applied on top. When nothing changed, the tree noted with our
last index is the answer: one git process in all.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from manager import versioning
from manager.changes.model import Change
from manager.changes.model import EntryType
from manager.changes.model import Kind
from manager.errors import StateError
from manager.fs import longpath
from manager.fs.regular import lstat_below
from manager.fs.regular import open_below
from manager.fs.regular import readlink_below
from manager.git.plumbing import Git
from manager.git.plumbing import GitError
from manager.git.plumbing import Repo
from manager.git.plumbing import Scan
from manager.git.plumbing import discover
from manager.session import paths

STORE_NAME = "workspace-checkpoints.git"
FORMAT_FILE = "workspace-format.json"   # the store's format (none: format 1)


@dataclass(frozen=True)
class Shadow:
    repo: Repo
    path: Path

    @property
    def objects(self) -> Path:
        return self.path / "objects"

    @property
    def tmp(self) -> Path:
        return self.path / "tmp"

    def _borrow(self) -> dict[str, str]:
        return {"GIT_OBJECT_DIRECTORY": str(self.objects),
                "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(self.repo.objects)}

    def work(self, index: Path | None = None) -> Git:
        """git on the user's work tree, writing objects (and an index) of our own."""
        env = self._borrow()
        if index is not None:
            env["GIT_INDEX_FILE"] = str(index)
        return Git(self.repo, env)

    def store(self) -> Git:
        """git on the store itself (its refs), reading the user's objects too."""
        return Git(Repo(self.repo.worktree, self.path, self.path),
                   {"GIT_ALTERNATE_OBJECT_DIRECTORIES": str(self.repo.objects)})

    def local(self) -> Git:
        """git on the store alone: which objects are really ours."""
        return Git(Repo(self.repo.worktree, self.path, self.path), {})

    @property
    def index_cache(self) -> Path:
        """Our last work-tree index for this work tree: fresh stat data and cache-tree."""
        key = hashlib.sha1(os.fsencode(self.repo.worktree)).hexdigest()[:16]
        return self.tmp / f"index-cache.{key}"

    @property
    def tree_note(self) -> Path:
        """The tree that :attr:`index_cache` holds, for the file it names."""
        return self.index_cache.with_name(self.index_cache.name + ".tree")

    @property
    def view_notes(self) -> Path:
        """Recent overlay views: ``<key of the work tree and overlay> <tree>`` lines."""
        return self.index_cache.with_name(self.index_cache.name + ".views")

    @contextlib.contextmanager
    def scratch_index(self, seed: bool = True) -> Iterator[Path]:
        """A temporary index, seeded (``seed``) from our cache, else from the user's index.

        Git never rewrites an index in place (it writes ``.lock`` and renames), so a
        hard link is a safe zero-copy seed; the user's index is only ever read.
        """
        self.tmp.mkdir(exist_ok=True)
        index = self.tmp / f"index.{os.getpid()}.{secrets.token_hex(4)}"
        try:
            if seed:
                _seed(index, self.index_cache, self.repo.index)
            yield index
        finally:
            index.unlink(missing_ok=True)
            index.with_name(index.name + ".lock").unlink(missing_ok=True)


def _seed(index: Path, cache: Path, user_index: Path) -> None:
    try:
        os.link(cache, index)
        return
    except OSError:
        pass
    if user_index.exists():
        shutil.copyfile(user_index, index)


def _keep_as_cache(shadow: Shadow, index: Path, tree: str) -> None:
    """``index`` becomes the cache, with a note of the tree it holds."""
    tmp = shadow.tmp / f"cache.{os.getpid()}.{secrets.token_hex(4)}"
    with contextlib.suppress(OSError):
        os.link(index, tmp)
        try:
            os.replace(tmp, shadow.index_cache)
        finally:
            # rename() does nothing when both names are links to one file: tmp stays.
            tmp.unlink(missing_ok=True)
        _write_note(shadow, f"{_identity(index)} {tree}")


def _identity(path: Path) -> str:
    """Which file ``path`` is, as of its last write (ctime moves with each hard link)."""
    st = os.stat(path)
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def _write_note(shadow: Shadow, text: str, path: Path | None = None) -> None:
    # A cache: a plain rename is enough, a lost note only costs one write-tree.
    tmp = shadow.tmp / f"note.{os.getpid()}.{secrets.token_hex(4)}"
    tmp.write_text(text)
    os.replace(tmp, path or shadow.tree_note)


def _noted_tree(shadow: Shadow, index: Path) -> str | None:
    """The tree of ``index`` when it is still the very file the note was written for.

    The note names the cache file by inode and mtime, so a cache replaced by
    another process (or rewritten by git) simply does not match.
    """
    try:
        identity, tree = shadow.tree_note.read_text().split()
        return tree if identity == _identity(index) else None
    except (OSError, ValueError):
        return None


def open_shadow(project: Path) -> Shadow | None:
    """The project's shadow store (created on first use), or None outside git."""
    repo = discover(project)
    if repo is None:
        return None
    shadow = Shadow(repo, repo.common_dir / STORE_NAME)
    if not (shadow.path / "HEAD").exists():
        _init(shadow)
    _check_format(shadow)
    return shadow


def _check_format(shadow: Shadow) -> None:
    """A store a newer workspace laid out is left alone (NewerFormat)."""
    try:
        versioning.load("checkpoints", shadow.path / FORMAT_FILE)
    except FileNotFoundError:
        return   # made before stores recorded a format: format 1
    except ValueError as exc:
        raise StateError(f"checkpoint store {shadow.path} has an unreadable "
                         f"{FORMAT_FILE} ({exc}); nothing was changed",
                         hint=f"inspect {shadow.path / FORMAT_FILE}") from exc


def _init(shadow: Shadow) -> None:
    # Built by hand: `git init` would obey an inherited GIT_DIR, and templates bring hooks.
    tmp = shadow.path.with_name(f"{STORE_NAME}.{os.getpid()}.init")
    shutil.rmtree(tmp, ignore_errors=True)
    for sub in ("objects/info", "objects/pack", "refs", "tmp"):
        (tmp / sub).mkdir(parents=True)
    (tmp / "HEAD").write_text("ref: refs/heads/unused\n")
    (tmp / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
                                "\tlogAllRefUpdates = false\n[gc]\n\tauto = 0\n")
    (tmp / "description").write_text("workspace checkpoints: see docs/guardrails.md\n")
    (tmp / FORMAT_FILE).write_text(json.dumps(versioning.stamp("checkpoints", {})) + "\n")
    try:
        os.rename(tmp, shadow.path)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # another process made it first
        return
    _match_object_format(shadow)


def _match_object_format(shadow: Shadow) -> None:
    fmt = Git(shadow.repo).run("rev-parse", "--show-object-format", check=False).stdout.strip()
    if fmt and fmt != b"sha1":
        shadow.local().run("config", "extensions.objectFormat", fmt.decode())
        shadow.local().run("config", "core.repositoryformatversion", "1")


@dataclass(frozen=True)
class Snapshot:
    """The project's state: the real work tree, and the view with the overlay's changes."""

    worktree: str
    view: str
    head: str | None


def take(shadow: Shadow, overlay: list[Change] | None = None) -> Snapshot:
    with shadow.scratch_index() as index:
        git = shadow.work(index)
        scan = _scan(shadow, git, index)
        if scan.paths:
            git.add_paths(scan.paths)
            if _ignore_rules_changed(shadow, scan.paths):
                _drop_newly_ignored(shadow, git)
        # Nothing differs from our last index: its tree is known, unless git rewrote it.
        worktree = None if scan.paths else _noted_tree(shadow, index)
        if worktree is None:
            worktree = git.write_tree()
            _keep_as_cache(shadow, index, worktree)   # before the overlay: it tracks the work tree
        view = _overlay_view(shadow, git, worktree, overlay) if overlay else worktree
    return Snapshot(worktree, view, scan.head)


# An overlay entry younger than this is not memoised: a same-size rewrite within the
# kernel's clock tick (a few ms) could keep its mtime (git's "racy" entries). Whole-second
# timestamps (a coarse filesystem) need RACY_COARSE_S.
RACY_S = 0.1
RACY_COARSE_S = 2.0
VIEW_NOTES_KEPT = 16


def _overlay_view(shadow: Shadow, git: Git, worktree: str, overlay: list[Change]) -> str:
    """The work tree's tree with the overlay's changes, memoised by what they are.

    Applying them costs several passes over our index; when neither the work
    tree nor any overlay entry changed since (same tree, same lstat of each upper
    entry, same exclude file), the view is the one noted then.
    """
    key = _overlay_key(shadow, worktree, overlay)
    notes = _view_notes(shadow)
    if key is not None and key in notes:
        return notes[key]
    view = git.write_tree() if apply_overlay(git, shadow, overlay) else worktree
    if key is not None:
        notes[key] = view
        lines = [f"{k} {v}" for k, v in list(notes.items())[-VIEW_NOTES_KEPT:]]
        _write_note(shadow, "\n".join(lines) + "\n", shadow.view_notes)
    return view


def _overlay_key(shadow: Shadow, worktree: str, overlay: list[Change]) -> str | None:
    digest = hashlib.sha1(worktree.encode())
    now = time.time()
    for path in _exclude_files(shadow):
        with contextlib.suppress(OSError):
            digest.update(str(os.stat(path).st_mtime_ns).encode())
    for change in overlay:
        try:
            st = longpath.lstat(change.upper_path)
        except OSError:
            return None
        if _racy(st, now):
            return None
        digest.update(os.fsencode(change.path) + b"\0" + os.fsencode(change.upper) + (
            f"\0{change.kind}:{change.opaque}:{change.new_type}:{st.st_mode}:{st.st_size}:"
            f"{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}\n").encode())
    return digest.hexdigest()


def _racy(st: os.stat_result, now: float) -> bool:
    coarse = st.st_mtime_ns % 1_000_000_000 == 0 and st.st_ctime_ns % 1_000_000_000 == 0
    return now - max(st.st_mtime, st.st_ctime) < (RACY_COARSE_S if coarse else RACY_S)


def _view_notes(shadow: Shadow) -> dict[str, str]:
    try:
        text = shadow.view_notes.read_text()
    except OSError:
        return {}
    return dict(line.split(" ", 1) for line in text.splitlines() if line.count(" ") == 1)


def _scan(shadow: Shadow, git: Git, index: Path) -> Scan:
    """What changed since our last index; a damaged one is dropped for the user's."""
    try:
        return git.scan()
    except GitError:
        if not shadow.index_cache.exists():
            raise
        shadow.index_cache.unlink(missing_ok=True)
        index.unlink(missing_ok=True)
        _seed(index, shadow.index_cache, shadow.repo.index)
        return git.scan()


def _ignore_rules_changed(shadow: Shadow, paths: list[bytes]) -> bool:
    """A .gitignore among the changes, or an exclude file newer than our last snapshot.

    (A ``core.excludesFile`` elsewhere than the default is noticed at the next
    .gitignore change.)
    """
    if any(p == b".gitignore" or p.endswith(b"/.gitignore") for p in paths):
        return True
    try:
        last = os.stat(shadow.tree_note).st_mtime_ns
    except OSError:
        return True
    for path in _exclude_files(shadow):
        with contextlib.suppress(OSError):
            if os.stat(path).st_mtime_ns >= last:
                return True
    return False


def _exclude_files(shadow: Shadow) -> list[Path]:
    return [shadow.repo.common_dir / "info" / "exclude",
            Path(paths.config_base(), "git", "ignore")]


def _drop_newly_ignored(shadow: Shadow, git: Git) -> None:
    """Forget files we added while untracked that an ignore rule now excludes.

    Our index outlives the snapshot, so without this a file added before the
    rule that ignores it (a .gitignore edit comes with a change, hence only
    then) would stay in every later snapshot. What the user's index tracks stays.
    """
    ours = git.ignored_entries()
    if ours:
        git.remove_cached(sorted(ours - shadow.work().ignored_entries()))


def head_tree(shadow: Shadow, head: str | None) -> str:
    git = shadow.work()
    return git.out("rev-parse", f"{head}^{{tree}}") if head else git.empty_tree()


# -- the overlay's pending changes, onto the index --------------------------------


HASH_BATCH = 256
# A file of the sandbox's larger than this is left out of a snapshot (its path keeps what the
# work tree has): git hash-object reads every byte, and `truncate -s 64G` costs the sandbox
# no block while the hook would read for minutes (attack pass 10).
SNAPSHOT_FILE_LIMIT = 32 << 20
# ... and all of them together (200 sparse files of 256 MiB stalled it the same way): past it,
# the rest are left out too; a file grown between the plan and the read counts as read.
SNAPSHOT_TOTAL_LIMIT = 256 << 20


@dataclass
class _Plan:
    removals: list[bytes]
    files: list[tuple[str, Change, bytes]]   # (mode, the change to hash, repo-relative path)
    skipped: list[str]                       # too large to snapshot (real paths)


def apply_overlay(git: Git, shadow: Shadow, changes: list[Change]) -> bool:
    """Put the overlay's pending changes under the work tree into the index."""
    plan = _plan(shadow.repo.worktree, changes)
    if plan.skipped:
        _note_skipped(plan.skipped)
    if not plan.removals and not plan.files:
        return False
    ignored = git.ignored([rel for _, _, rel in plan.files])
    files = [f for f in plan.files if f[2] not in ignored]
    ids = []
    budget = [SNAPSHOT_TOTAL_LIMIT]
    for at in range(0, len(files), HASH_BATCH):   # each batch's files held open: a bound
        with _hashable(shadow, files[at:at + HASH_BATCH], budget) as sources:
            ids += git.hash_files(sources)
    git.remove_cached(plan.removals)
    git.index_info([(mode, oid, rel) for (mode, _, rel), oid in zip(files, ids, strict=True)])
    return True


def _plan(root: Path, changes: list[Change]) -> _Plan:
    """Every entry is read below its upper root (fs/regular.py): a directory on the way that
    a running call swaps for a symlink is refused, never followed to the host."""
    plan = _Plan([], [], [])
    nested = _nested_repos(root, changes)
    total = 0
    for change in changes:
        rel = _relative(root, change.real_path)
        if rel is None or _inside(rel, nested):
            continue
        if change.kind is Kind.DELETED or change.kind is Kind.REPLACED or change.opaque:
            plan.removals.append(rel)
        if change.kind is Kind.DELETED:
            continue
        if change.new_type is EntryType.FILE:
            try:
                st = lstat_below(change.upper_root, change.upper_path)
            except OSError:
                continue   # changed since the walk: the next snapshot sees what it is
            if st.st_size > SNAPSHOT_FILE_LIMIT or total + st.st_size > SNAPSHOT_TOTAL_LIMIT:
                plan.skipped.append(change.real_path)
                continue
            total += st.st_size
            plan.files.append(("100755" if st.st_mode & stat.S_IXUSR else "100644", change, rel))
        elif change.new_type is EntryType.SYMLINK:
            plan.files.append(("120000", change, rel))
    return plan


def _note_skipped(paths: list[str]) -> None:
    """Said on stderr (the hook's log), through the sink (the names are the agent's): a
    checkpoint that leaves a file out says which."""
    from manager import ui

    shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    ui.err(f"workspace: checkpoint: not snapshotted (over {SNAPSHOT_FILE_LIMIT >> 20} MiB, or "
           f"past {SNAPSHOT_TOTAL_LIMIT >> 20} MiB in all; sparse files count whole): {shown}")


def _relative(root: Path, path: str) -> bytes | None:
    # Strings: a change may be 3,000 directories deep (Path.parents is quadratic there).
    top = str(root).rstrip("/") + "/"
    if not path.startswith(top):
        return None
    rel = path[len(top):].rstrip("/")
    if not rel or ".git" in rel.split("/"):
        return None
    return os.fsencode(rel)


def _nested_repos(root: Path, changes: list[Change]) -> set[bytes]:
    """Directories holding a repository of their own (submodules): one change each, via add -A."""
    found: set[bytes] = set()
    seen: set[str] = set()     # each directory looked at once, however deep the tree
    top = str(root).rstrip("/") + "/"
    for change in changes:
        parent = os.path.dirname(change.real_path)
        if os.path.basename(change.real_path) == ".git" and parent.startswith(top):
            found.add(os.fsencode(parent[len(top):]))
        while parent.startswith(top) and parent not in seen:
            seen.add(parent)
            with longpath.reach(parent + "/.git") as git_dir:
                if os.path.lexists(git_dir):
                    found.add(os.fsencode(parent[len(top):]))
            parent = os.path.dirname(parent)
    return found


def _inside(rel: bytes, dirs: set[bytes]) -> bool:
    return any(rel.startswith(d + b"/") for d in dirs)


@contextlib.contextmanager
def _hashable(shadow: Shadow, files: list[tuple[str, Change, bytes]],
              budget: list[int]) -> Iterator[list[Path]]:
    """Paths ``hash-object --stdin-paths`` can read: link targets via temp files; a file
    through a descriptor of ours (``/proc/PID/fd/N``): git opens the inode checked to be a
    regular file (manager/fs/regular.py), never a device or fifo the sandbox swapped in."""
    made: list[Path] = []
    held: list[int] = []
    sources: list[Path] = []
    try:
        for mode, change, _ in files:
            if mode == "120000":
                tmp = shadow.tmp / f"blob.{os.getpid()}.{len(made)}"
                tmp.write_bytes(os.fsencode(readlink_below(change.upper_root, change.upper_path)))
                made.append(tmp)
                sources.append(tmp)
            else:
                held.append(_open_file(change, budget))
                sources.append(Path(f"/proc/{os.getpid()}/fd/{held[-1]}"))
        yield sources
    finally:
        for fd in held:
            os.close(fd)
        for tmp in made:
            tmp.unlink(missing_ok=True)


def _open_file(change: Change, budget: list[int]) -> int:
    """The file, below its upper root; one grown past a limit since the plan is refused, and
    the snapshot with it (git would read all of it: a sparse file costs the sandbox no
    block). ``budget``: the bytes all files read so far may still add."""
    fd = open_below(change.upper_root, change.upper_path)
    size = os.fstat(fd).st_size
    budget[0] -= size
    if size > SNAPSHOT_FILE_LIMIT or budget[0] < 0:
        os.close(fd)
        raise OSError(errno.EFBIG, "grown past the snapshot limit", change.real_path)
    return fd
