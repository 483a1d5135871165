"""A directory the sandbox created, committed as one step: read once, planned and journaled
as one entry, published by one rename of a copy.

When the walk of the upper (:func:`manager.changes.model.read_changes`) meets a new
directory (its real parent looked up, its own name absent), :class:`Collector` takes a
census of the upper tree below it instead of a change per entry: one ``stat`` and one
``listxattr`` each, the least that says whether a rename may carry it. It may when every
entry is a directory, regular file, symlink, fifo or socket with no other hard link, no
setuid/setgid bit, no file capabilities, no owner other than the committer's (review would
show one), no overlay mark that means something (whiteout, opaque, metacopy, redirect), and
the tree holds no engine mount point and lies outside the project's ``.git`` (git's
history is applied through git). Anything else, and the tree is read entry by entry as
before: nothing here decides what a per-entry commit would refuse.

Before planning, :func:`settle` reads out entry by entry each collapsed tree that cannot go
whole: its real path exists now, a path named on the command line lies inside it, or an
entry in it is excluded (the user's patterns, what ``hide`` keeps out, workspace's state).
A tree step then publishes the tree as a copy: copied beside its destination under a
temporary name, synced, and renamed into place with one ``rename`` (atomic: the real path is
absent or whole). Never the upper tree itself: an overlay still alive elsewhere reaches the
upper's inodes wherever they go (commit/steps.py). A resumed commit finds the step done when the
upper tree is gone, applies it when the real path is absent, and otherwise leaves it to the
fresh plan of the same commit, which reads the tree entry by entry (each entry a conflict
or not, as ever).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from manager.changes.meta import CAPABILITY_XATTR
from manager.changes.meta import OVERLAY_XATTR_PREFIXES
from manager.changes.model import Change
from manager.changes.model import EntryType
from manager.changes.model import Kind
from manager.changes.model import Layer
from manager.changes.model import is_within
from manager.commit import judged
from manager.commit.exclude import Excluder
from manager.commit.journal import Step
from manager.commit.judged import TreeSum
from manager.commit.safefs import DIR_FLAGS
from manager.commit.safefs import lstat_at
from manager.commit.safefs import proc_path
from manager.commit.safefs import remove_at
from manager.commit.safefs import sync_xattrs
from manager.fs import longpath

TYPE_CHECKING = False
if TYPE_CHECKING:
    from manager.commit.steps import Executor

MAX_DEPTH = 64    # deeper trees go entry by entry (their descriptors are managed there)
# Overlay marks a plain rename would turn into meaning in the real tree, or that say the
# upper entry is not the whole file.
MEANINGFUL = ("overlay.whiteout", "overlay.whiteouts", "overlay.opaque", "overlay.metacopy",
              "overlay.redirect")
LEFT = "left"     # a resumed tree step neither done nor applied: the fresh plan reads it


@dataclass
class Census:
    upper: str                                   # the tree's upper directory
    entries: list[tuple[str, EntryType]] = field(default_factory=list)  # below it, relative
    size: int = 0                                # bytes of regular files
    judged: TreeSum = field(default_factory=TreeSum)   # what the plan judged (commit/judged.py)


class Collector:
    """The ``collapse`` of :func:`read_changes` for a commit: new trees that may go whole."""

    def __init__(self, project: Path) -> None:
        self.git_dir = str(project / ".git")
        self.trees: dict[str, Census] = {}
        self.euid = os.geteuid()
        self.own = (os.geteuid(), os.getegid())
        self._owners: dict[tuple[int, int], tuple[int, int]] = {}   # on disk -> inside

    def __call__(self, layer: Layer, upper: str, real: str, st: os.stat_result) -> bool:
        if is_within(real, self.git_dir) or any(is_within(s, real) for s in layer.scaffold):
            return False
        found = self.census(layer, upper, st)
        if found is not None:
            self.trees[real] = found
        return found is not None

    def census(self, layer: Layer, upper: str, root: os.stat_result) -> Census | None:
        if self.euid != 0 and not root.st_mode & stat.S_IWUSR:
            return None   # an ordinary user cannot move a read-only directory elsewhere
        found = Census(upper)
        try:
            home = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            if not self._attrs_ok(os.listxattr(upper, follow_symlinks=False)):
                return None
            found.judged.add("", root)
            todo = [("", 0)]
            while todo:
                rel, depth = todo.pop()
                if depth >= MAX_DEPTH or not self._read_dir(layer, found, rel, depth, todo):
                    return None
        except OSError:
            return None   # unreadable: the per-entry way reports it
        finally:
            os.fchdir(home)
            os.close(home)
        return found

    def _read_dir(self, layer: Layer, found: Census, rel: str, depth: int,
                  todo: list[tuple[str, int]]) -> bool:
        fd = longpath.open_path(f"{found.upper}/{rel}" if rel else found.upper, DIR_FLAGS)
        try:
            # Attributes are read by bare names in the directory (census restores the working
            # directory): through /proc/self/fd/N/name each lookup cost six times as much.
            os.fchdir(fd)
            with os.scandir(fd) as entries:
                for entry in entries:
                    st = entry.stat(follow_symlinks=False)
                    kind = self._kind(layer, st)
                    if kind is None:
                        return False
                    child = f"{rel}/{entry.name}" if rel else entry.name
                    names = os.listxattr(entry.name, follow_symlinks=False)
                    if names and not self._attrs_ok(names):
                        return False
                    found.entries.append((child, kind))
                    found.judged.add(child, st)
                    if kind is EntryType.DIR:
                        todo.append((child, depth + 1))
                    elif kind is EntryType.FILE:
                        found.size += st.st_size
        finally:
            os.close(fd)
        return True

    def _kind(self, layer: Layer, st: os.stat_result) -> EntryType | None:
        """The entry's type when a rename may carry it; None when it needs the per-entry way."""
        mode = st.st_mode
        if self.euid != 0 and st.st_uid != self.euid:
            return None   # only root keeps another owner
        if layer.ids is not None and self._inside(layer, st) != self.own:
            return None   # review shows its owner: the per-entry way notes it
        if stat.S_ISDIR(mode):
            return EntryType.DIR
        if st.st_nlink != 1 or mode & (stat.S_ISUID | stat.S_ISGID):
            return None   # other names would share the real inode; special
        if stat.S_ISREG(mode):
            return EntryType.FILE
        if stat.S_ISLNK(mode):
            return EntryType.SYMLINK
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            return EntryType.OTHER
        return None       # devices, whiteouts

    def _inside(self, layer: Layer, st: os.stat_result) -> tuple[int, int]:
        key = (st.st_uid, st.st_gid)
        found = self._owners.get(key)
        if found is None:
            assert layer.ids is not None
            found = self._owners[key] = layer.ids.inside(*key)
        return found

    @staticmethod
    def _attrs_ok(names: list[str]) -> bool:
        """No capabilities, no overlay mark that means something (the others are overlay's
        bookkeeping, which a copy never carries: ``content_xattrs``)."""
        if CAPABILITY_XATTR in names:
            return False
        return not any(n.startswith(OVERLAY_XATTR_PREFIXES) and n.endswith(MEANINGFUL)
                       for n in names)


# -- planning ---------------------------------------------------------------------


def settle(changes: list[Change], trees: dict[str, Census], inside: Sequence[Path | str],
           excluded: Callable[[Path | str], bool]) -> tuple[list[Change], dict[str, Census]]:
    """(``changes`` with each collapsed tree that cannot go whole read out entry by entry,
    the trees that can)."""
    if not trees:
        return changes, {}
    whole: dict[str, Census] = {}
    opened: list[Change] = []
    named = [str(p) for p in inside]
    for change in changes:
        census = trees.get(change.real_path)
        if census is None:
            continue
        if _goes_whole(change.real_path, census, named, excluded):
            whole[change.real_path] = census
        else:
            opened.extend(entries(change, census))
    if opened:
        changes = sorted([*changes, *opened], key=lambda c: c.real_path.replace("/", "\0"))
    return changes, whole


def _goes_whole(real: str, census: Census, named: list[str],
                excluded: Callable[[Path | str], bool]) -> bool:
    if any(p != real and is_within(p, real) for p in named):
        return False
    try:
        longpath.lstat(real)
        return False            # made outside since: merged entry by entry, each judged
    except FileNotFoundError:
        pass
    except OSError:
        return False
    if excluded(real):
        return True             # skipped as one
    if isinstance(excluded, Excluder) and not excluded.reaches(real):
        return True             # no pattern can name anything below it
    return not any(excluded(f"{real}/{rel}") for rel, _ in census.entries)


def entries(change: Change, census: Census) -> list[Change]:
    """The changes a per-entry read finds below a collapsed tree (the census vouches that
    each is added, plain, and the committer's)."""
    root, upper = change.real_path, census.upper
    return [Change(f"{root}/{rel}", Kind.ADDED, f"{upper}/{rel}", kind, None, change.in_project)
            for rel, kind in census.entries]


def expanded(changes: list[Change], trees: dict[str, Census]) -> list[Change]:
    """``changes`` with the entries below each of ``trees`` (read by those that need files)."""
    out = list(changes)
    for change in changes:
        census = trees.get(change.real_path)
        if census is not None:
            out.extend(entries(change, census))
    return out


def holding(trees: dict[str, Census], paths: Sequence[Path | str]) -> list[str]:
    """The paths that lie inside one of ``trees``."""
    return [str(p) for p in paths if any(is_within(str(p), t) and str(p) != t for t in trees)]


# -- carrying out -----------------------------------------------------------------


def publish(executor: Executor, step: Step, dir_fd: int, name: str) -> str | tuple[str, int]:
    """Copy the tree of ``step`` beside its destination: (the copy's temporary name, its
    bytes), which the executor renames into place with its batch, after the batch's sync
    (never the upper tree itself: an overlay still alive elsewhere reaches the upper's
    inodes wherever they go, commit/steps.py); or a conflict reason, or :data:`LEFT`. The
    upper tree goes after the sync that follows the rename (a crash before leaves both: the
    fresh plan finds each entry already there)."""
    if lstat_at(dir_fd, name) is not None:
        return LEFT if executor.check is not None else \
            "created outside the sandbox after the sandbox created it"
    up_fd, up_name = executor.upper_at(step)
    census = executor.trees.get(step.path)
    if census is None:   # resumed: counted again (the upper is at rest, as when planned)
        layer = executor.layers[step.layer]
        assert step.upper is not None
        census = Collector(layer.target).census(
            layer, step.upper, os.stat(up_name, dir_fd=up_fd, follow_symlinks=False))
        if census is None:
            return LEFT
    executor.note_filesystem(dir_fd)
    temp = executor.temp_name()
    os.mkdir(temp, 0o700, dir_fd=dir_fd)
    try:
        copied = TreeSum()
        _copy_dir(up_fd, up_name, dir_fd, temp, copied, "")
        judged.require(step.judged, copied.value, step.path, resumed=executor.check is not None)
    except BaseException:
        remove_at(dir_fd, temp)
        raise
    return temp, census.size


def _copy_dir(src_parent: int, src_name: str, dst_parent: int, dst_name: str,
              copied: TreeSum, rel: str) -> None:
    """Copy a tree of at most MAX_DEPTH levels, summing what it copies (``copied``) as the
    census summed what the plan judged."""
    from manager.commit.steps import _copy_entry as copy_entry
    from manager.commit.steps import _set_meta as set_meta

    src = os.open(src_name, DIR_FLAGS, dir_fd=src_parent)
    try:
        first = os.fstat(src)
        if not rel:
            copied.add("", first)
        dst = os.open(dst_name, DIR_FLAGS, dir_fd=dst_parent)
        try:
            with os.scandir(src) as found:
                for entry in found:
                    st = entry.stat(follow_symlinks=False)
                    child = f"{rel}/{entry.name}" if rel else entry.name
                    copied.add(child, st)
                    if stat.S_ISDIR(st.st_mode):
                        os.mkdir(entry.name, 0o700, dir_fd=dst)
                        _copy_dir(src, entry.name, dst, entry.name, copied, child)
                    else:
                        copy_entry(src, entry.name, st, dst, entry.name)
            sync_xattrs(proc_path(src_parent, src_name), dst)
            last = os.fstat(src)
            judged.same_while_read(first, last, rel or src_name)
            set_meta(dst, last, times=True)   # last: its entries moved its times
        finally:
            os.close(dst)
    finally:
        os.close(src)
