"""The change model: read an overlayfs upper directory into a list of changes.

Shared by every engine. An engine says which upper directory stands over which
real directory (a :class:`Layer`); everything else -- status, diff, commit,
discard -- works from the changes read here.

The cases are a closed set, as in binpash/try's ``TRYCASE(change, local)``: the
upper entry is a whiteout, an opaque directory, a directory, a regular file, a
symlink or another special file, and the real path is a directory, a file, a
symlink, something else or missing.
"""

from __future__ import annotations

import os
import stat
from enum import StrEnum
from functools import cached_property
from pathlib import Path

from manager.changes import meta
from manager.changes.walkcache import MISSING
from manager.changes.walkcache import WalkCache
from manager.changes.walkcache import stat_key
from manager.fs import longpath
from manager.fs.regular import open_regular
from manager.record import Value
from manager.session.paths import ancestors as ancestors
from manager.session.paths import is_within as is_within  # the one rule, for its users here

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.record
if TYPE_CHECKING:
    from collections.abc import Callable
    from collections.abc import Sequence
    from typing import Any
    from typing import Final

    # Asked of a new directory (its real path looked up and absent): whether its tree stays
    # one change, unread (commit's tree step: manager.commit.trees). (layer, upper, real, st)
    Collapse = Callable[["Layer", str, str, os.stat_result], bool]

OPAQUE_XATTRS = ("trusted.overlay.opaque", "user.overlay.opaque")
WHITEOUT_XATTRS = ("trusted.overlay.whiteout", "user.overlay.whiteout")


class Kind(StrEnum):
    ADDED = "added"          # no real entry; the upper entry is new
    MODIFIED = "modified"    # same type, different content (or link target)
    MODE = "mode"            # same type and content, different permissions
    XATTRS = "xattrs"        # same type, content and permissions; other extended attributes
    DELETED = "deleted"      # whiteout over a real entry
    REPLACED = "replaced"    # type changed, or an opaque directory over a real one


class EntryType(StrEnum):
    DIR = "dir"
    FILE = "file"
    SYMLINK = "symlink"
    OTHER = "other"


class Layer(Value):
    """An upper directory and the real directory it stands over."""

    __slots__ = ("upper", "target", "scaffold", "ids")
    upper: Final[Path]
    target: Final[Path]
    # Real paths of directories the engine made in the upper layer for its own
    # mounts: not changes themselves (their contents still are).
    scaffold: Final[frozenset[str]]
    # How on-disk owners in ``upper`` read inside; None: owners are not reviewed.
    ids: Final[meta.IdMap | None]

    def __init__(self, upper: Path, target: Path, scaffold: frozenset[str] = frozenset(),
                 ids: meta.IdMap | None = None) -> None:
        self.upper = upper
        self.target = target
        self.scaffold = scaffold
        self.ids = ids


class Change(Value):
    __slots__ = ("real_path", "kind", "upper_path", "new_type", "old_type", "in_project",
                 "opaque", "below", "special", "owner", "__dict__")   # __dict__: cached_property
    # Paths are held as strings and made Path objects on first use: review of
    # 100,000 changes shows (and so needs Paths for) only a few of them.
    real_path: Final[str]              # the real, absolute path this change applies to
    kind: Final[Kind]
    upper_path: Final[str]             # the upper entry (a whiteout for DELETED)
    new_type: Final[EntryType | None]  # None for DELETED
    old_type: Final[EntryType | None]  # None for ADDED
    in_project: Final[bool]
    opaque: Final[bool]                # a directory whose real contents are all replaced
    # Read with ``summarize``: a new directory's file count, its contents not listed.
    below: Final[int | None]
    # Why the new entry needs an explicit decision to become real (see meta.special).
    special: Final[tuple[str, ...]]
    # The new entry's owner (uid, gid) inside, when it is not what it would be without the
    # sandbox: another owner than the real entry's, or than yours for a new entry.
    owner: Final[tuple[int, int] | None]

    def __init__(self, real_path: str, kind: Kind, upper_path: str, new_type: EntryType | None,
                 old_type: EntryType | None, in_project: bool, opaque: bool = False,
                 below: int | None = None, special: tuple[str, ...] = (),
                 owner: tuple[int, int] | None = None) -> None:
        self.real_path = real_path
        self.kind = kind
        self.upper_path = upper_path
        self.new_type = new_type
        self.old_type = old_type
        self.in_project = in_project
        self.opaque = opaque
        self.below = below
        self.special = special
        self.owner = owner

    @cached_property
    def path(self) -> Path:
        return Path(self.real_path)

    @cached_property
    def upper(self) -> Path:
        return Path(self.upper_path)

    @cached_property
    def upper_root(self) -> str:
        """The directory of the host's that the entry is below: ``upper_path`` without
        the trailing names it shares with ``real_path`` (the layer's upper directory, or
        one of the host's above it). Below it, every name is the sandbox's (fs/regular.py's
        ``open_below`` follows none of them)."""
        up, real = self.upper_path.split("/"), self.real_path.split("/")
        shared = 0
        while shared < min(len(up), len(real)) - 1 and up[-1 - shared] == real[-1 - shared]:
            shared += 1
        return "/".join(up[:len(up) - shared]) or "/"

    def as_json(self) -> dict[str, object]:
        return {
            "path": self.real_path,
            "kind": self.kind.value,
            "type": (self.new_type or self.old_type or EntryType.OTHER).value,
            "old_type": self.old_type.value if self.old_type else None,
            "in_project": self.in_project,
            "opaque": self.opaque,
            "special": list(self.special),
            "owner": f"{self.owner[0]}:{self.owner[1]}" if self.owner else None,
        }


def entry_type(mode: int) -> EntryType:
    if stat.S_ISDIR(mode):
        return EntryType.DIR
    if stat.S_ISREG(mode):
        return EntryType.FILE
    if stat.S_ISLNK(mode):
        return EntryType.SYMLINK
    return EntryType.OTHER


def is_whiteout(path: Path | str, st: os.stat_result) -> bool:
    if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
        return True
    return stat.S_ISREG(st.st_mode) and st.st_size == 0 and _has_xattr(path, WHITEOUT_XATTRS)


def is_opaque(path: Path | str) -> bool:
    return _has_xattr(path, OPAQUE_XATTRS, value=b"y")


def _has_xattr(path: Path | str, names: tuple[str, ...], value: bytes | None = None) -> bool:
    for name in names:
        try:
            found = os.getxattr(path, name, follow_symlinks=False)
        except OSError:
            continue
        if value is None or found == value:
            return True
    return False


def _lstat(path: str) -> os.stat_result | None:
    try:
        return longpath.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


class _Walk:
    """What stays the same during one layer's walk, and where its changes go (a list,
    not generators: a change found 10 directories deep would pass through 20 of them)."""

    __slots__ = ("layer", "project", "summarize", "found", "cache", "on_found", "told", "todo",
                 "counted", "over_real", "collapse", "merged")

    def __init__(self, layer: Layer, project: str, summarize: int | None,
                 found: list[Change], cache: WalkCache | None,
                 on_found: Callable[[Change], None] | None,
                 over_real: dict[str, str] | None = None,
                 collapse: Collapse | None = None) -> None:
        self.layer = layer
        self.project = project
        self.summarize = summarize
        self.found = found
        self.cache = cache
        self.on_found = on_found
        self.collapse = collapse
        self.merged = False    # the directory being read has a real directory looked up
        self.told = len(found)   # changes already passed to on_found
        # Directories still to read: a loop, not recursion (a chain of 3,000 directories
        # the agent made must not exhaust Python's stack).
        self.todo: list[tuple[str, str, bool, bool]] = []
        # The directory being read lies in a new one whose files were counted and found
        # too few to summarise: nothing below it is summarised either, nor counted again
        # (a count per level of a deep new tree is quadratic).
        self.counted = False
        # {real path: upper entry} of the sandbox's own entries standing over real ones
        # (manager.changes.seen), when asked for.
        self.over_real = over_real

    def tell(self) -> None:
        assert self.on_found is not None
        found = self.found
        while self.told < len(found):
            self.told += 1
            self.on_found(found[self.told - 1])


def read_changes(layers: list[Layer], project: Path, summarize: int | None = None,
                 cache: WalkCache | None = None,
                 on_found: Callable[[Change], None] | None = None,
                 over_real: dict[str, str] | None = None,
                 collapse: Collapse | None = None) -> list[Change]:
    """Every change in ``layers``, parents before children, sorted by path.

    With ``summarize``, a new (or replaced) directory holding more than that many
    files is one change carrying its file count (``below``), not one per file: review
    of a 50,000-file tree costs a count, not 50,000 changes. With ``cache``, verdicts
    and counts whose entries are unchanged since the last review are reused.
    ``on_found`` is told of each change as the walk finds it (before the sort).
    ``over_real`` is given each upper entry that hides a real one (see
    :mod:`manager.changes.seen`), changed or not.
    With ``collapse``, a new directory it accepts is one change and nothing below it is read.
    """
    changes: list[Change] = []
    for layer in layers:
        if layer.upper.is_dir():
            walk = _Walk(layer, str(project), summarize, changes, cache, on_found, over_real,
                         collapse)
            walk.todo.append((str(layer.upper), str(layer.target), False, False))
            while walk.todo:
                _walk(walk, *walk.todo.pop())
    # Path order (by components): "/" sorts before any character a name can hold.
    changes.sort(key=lambda c: c.real_path.replace("/", "\0"))
    return changes


def _child(directory: str, name: str) -> str:
    return directory + name if directory.endswith("/") else directory + "/" + name


_UPPER_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_PATH: the real directory is only looked up in (search permission, as a path walk).
_REAL_DIR = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC


def _walk(walk: _Walk, upper_dir: str, real_dir: str, parent_new: bool, counted: bool) -> None:
    # Entries are looked up relative to open directories: a long path walked once, not
    # once per entry (a quarter of a 5,000-file review's stat time), and every call on an
    # entry names it below its directory's descriptor, so no path is ever too long.
    try:
        upper_fd = longpath.open_path(upper_dir, _UPPER_DIR)
    except OSError:
        return
    real_fd = None if parent_new else _open_real(real_dir)
    walk.counted = counted
    walk.merged = not parent_new
    # Below a directory in the project, all is; above it, only the project itself.
    project = walk.project
    dir_in_project = is_within(real_dir, project)
    try:
        for entry in _entries(upper_fd):
            name = entry.name
            real = _child(real_dir, name)
            # Below an added or opaque directory the real tree is hidden: all is new.
            rst = None if parent_new else _lstat_in(real_fd, name, real)
            at = _At(upper_dir + "/" + name, _proc(upper_fd, name),
                     real if real_fd is None else _proc(real_fd, name))
            _entry(walk, entry, at, real, rst, dir_in_project or real == project)
            if walk.on_found is not None:
                walk.tell()
    finally:
        os.close(upper_fd)
        if real_fd is not None:
            os.close(real_fd)


def _entries(directory: int) -> list[os.DirEntry[str]]:
    """An upper directory's entries, in directory order (read_changes sorts them all);
    none when it cannot be listed. Errors about one entry are not swallowed here."""
    try:
        with os.scandir(directory) as found:
            return list(found)
    except OSError:
        return []


def _proc(fd: int, name: str) -> str:
    return f"/proc/self/fd/{fd}/{name}"


class _At:
    """An upper entry's path (recorded) and the short names it is read by (``/proc/self/
    fd/N/name``: its directory's descriptor) on both sides."""

    __slots__ = ("path", "upper", "real")

    def __init__(self, path: str, upper: str, real: str) -> None:
        self.path = path
        self.upper = upper
        self.real = real


def _open_real(path: str) -> int | None:
    try:
        return longpath.open_path(path, _REAL_DIR)
    except OSError:
        return None  # looked up by path, one entry at a time


def _lstat_in(directory: int | None, name: str, path: str) -> os.stat_result | None:
    if directory is None:
        return _lstat(path)
    try:
        return os.lstat(name, dir_fd=directory)
    except (FileNotFoundError, NotADirectoryError):
        return None


def count_files(top: Path | str, cache: WalkCache | None = None) -> int:
    """Entries below ``top`` that are not directories (whiteouts excepted).

    ``top`` is a new, opaque or replaced directory: nothing below it hides a real
    entry, so overlayfs wrote no whiteouts there and a directory without
    subdirectories (a link count of 2 on ext4, xfs, tmpfs...) holds only files: its
    names are counted, not each entry looked at. The count is shown, never acted on:
    a real directory removed from outside after the sandbox deleted in it can leave
    whiteouts that such a count includes. With ``cache``, a directory whose stat data
    is unchanged is not read again (100,000 files: 3 ms, not 70).
    """
    count = 0
    stack = [os.fspath(top)]
    while stack:
        directory = stack.pop()
        try:
            st = longpath.lstat(directory)
            key = stat_key(st)
            hit: Any = MISSING if cache is None else cache.get(directory, key)
            if hit is MISSING:
                hit = _read_dir(directory, st)
                if cache is not None:
                    cache.put(directory, key, hit, st.st_ctime_ns)
        except OSError:
            continue
        count += hit[0]
        stack.extend(directory + "/" + name for name in hit[1])
    return count


def _read_dir(directory: str, st: os.stat_result) -> tuple[int, tuple[str, ...]]:
    """(files in ``directory``, names of its subdirectories)."""
    fd = longpath.open_path(directory, _UPPER_DIR)
    try:
        if st.st_nlink == 2:
            return len(os.listdir(fd)), ()
        files, subdirs = 0, []
        with os.scandir(fd) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    subdirs.append(entry.name)
                elif entry.is_file(follow_symlinks=False) or _counts(fd, entry):
                    files += 1
        return files, tuple(subdirs)
    finally:
        os.close(fd)


def _counts(fd: int, entry: os.DirEntry[str]) -> bool:
    if entry.is_symlink():
        return True
    return not is_whiteout(_proc(fd, entry.name), entry.stat(follow_symlinks=False))


def _entry(walk: _Walk, entry: os.DirEntry[str], at: _At, real: str,
           rst: os.stat_result | None, in_project: bool) -> None:
    ust = entry.stat(follow_symlinks=False)
    old_type = entry_type(rst.st_mode) if rst else None
    upper = at.path

    if is_whiteout(at.upper, ust):
        if rst is not None:
            walk.found.append(Change(real, Kind.DELETED, upper, None, old_type, in_project))
        return

    new_type = entry_type(ust.st_mode)
    if new_type is EntryType.DIR:
        _dir_entry(walk, at, ust, real, rst, in_project)
        return
    if rst is not None and walk.over_real is not None:
        walk.over_real[real] = upper

    verdict = _leaf(walk, at, ust, rst)
    if verdict is not None:
        kind, special, owner = verdict
        walk.found.append(Change(real, _KINDS[kind], upper, new_type, old_type, in_project,
                                 special=special, owner=owner))


_KINDS = {kind.value: kind for kind in Kind}
Verdict = tuple[str, tuple[str, ...], tuple[int, int] | None]


def _leaf(walk: _Walk, at: _At, ust: os.stat_result,
          rst: os.stat_result | None) -> Verdict | None:
    """A file's (kind, special, owner), or None when it is no change; from the cache
    when both its entries are as they were (a same-size edit is not reread)."""
    cache = walk.cache
    if cache is None or rst is None:
        return _judge_leaf(walk.layer, at.upper, ust, at.real, rst)
    key = stat_key(ust) + stat_key(rst)
    verdict = cache.get(at.path, key)
    if verdict is MISSING:
        verdict = _judge_leaf(walk.layer, at.upper, ust, at.real, rst)
        cache.put(at.path, key, verdict, max(ust.st_ctime_ns, rst.st_ctime_ns))
    return verdict  # type: ignore[no-any-return]


def _judge_leaf(layer: Layer, upper: str, ust: os.stat_result, real: str,
                rst: os.stat_result | None) -> Verdict | None:
    kind = _leaf_kind(upper, ust, real, rst)
    if kind is None and rst is not None and _xattrs_differ(upper, real):
        kind = Kind.XATTRS
    owner = _owner(layer, ust, rst)
    if kind is None and owner is not None and not stat.S_ISLNK(ust.st_mode):
        kind = Kind.MODE
    if kind is None:
        return None
    return kind.value, meta.special(upper, ust), owner


_OWN = (os.geteuid(), os.getegid())


def _owner(layer: Layer, ust: os.stat_result, rst: os.stat_result | None) -> tuple[int, int] | None:
    """The upper entry's owner inside when it differs from what it would be natively:
    the real entry's owner, or for a new entry the committing user's own ids."""
    if layer.ids is None:
        return None   # an engine whose owners on disk mean nothing inside (containers)
    inside = layer.ids.inside(ust.st_uid, ust.st_gid)
    expected = (rst.st_uid, rst.st_gid) if rst is not None else _OWN
    return None if inside == expected else inside


def _dir_entry(walk: _Walk, at: _At, ust: os.stat_result, real: str,
               rst: os.stat_result | None, in_project: bool) -> None:
    old_type = entry_type(rst.st_mode) if rst else None
    upper = at.path
    opaque = is_opaque(at.upper)
    kind = _dir_kind(ust, rst, opaque)
    owner = _owner(walk.layer, ust, rst)
    if kind is None and owner is not None:
        kind = Kind.MODE
    if kind is None and rst is not None and _xattrs_differ(at.upper, at.real):
        kind = Kind.XATTRS
    hidden = rst is None or opaque or old_type is not EntryType.DIR
    if rst is not None and hidden and walk.over_real is not None:
        walk.over_real[real] = upper
    if walk.collapse is not None and rst is None and walk.merged and owner is None \
            and not opaque and walk.collapse(walk.layer, upper, real, ust):
        walk.found.append(Change(real, Kind.ADDED, upper, EntryType.DIR, None, in_project))
        return
    summarize = walk.summarize
    below = count_files(upper, walk.cache) \
        if summarize is not None and hidden and not walk.counted else None
    if below is not None and below > (summarize or 0) and kind is not None:
        walk.found.append(Change(real, kind, upper, EntryType.DIR, old_type, in_project,
                                 opaque=opaque, below=below, owner=owner))
        return
    if kind is not None and not (real in walk.layer.scaffold and not opaque):
        walk.found.append(Change(real, kind, upper, EntryType.DIR, old_type, in_project,
                                 opaque=opaque, owner=owner))
    walk.todo.append((upper, real, hidden, walk.counted or below is not None))


def _xattrs_differ(upper: str, real: str) -> bool:
    try:
        return meta.content_xattrs(upper) != meta.content_xattrs(real)
    except OSError:
        return False  # unreadable attributes (a permission): content decides


def _dir_kind(ust: os.stat_result, rst: os.stat_result | None, opaque: bool) -> Kind | None:
    if rst is None:
        return Kind.ADDED
    if not stat.S_ISDIR(rst.st_mode) or opaque:
        return Kind.REPLACED
    if stat.S_IMODE(ust.st_mode) != stat.S_IMODE(rst.st_mode):
        return Kind.MODE
    return None


def _leaf_kind(upper: str, ust: os.stat_result, real: str,
               rst: os.stat_result | None) -> Kind | None:
    if rst is None:
        return Kind.ADDED
    if entry_type(rst.st_mode) is not entry_type(ust.st_mode):
        return Kind.REPLACED
    if not same_content(upper, ust, real, rst):
        return Kind.MODIFIED
    if stat.S_IMODE(ust.st_mode) != stat.S_IMODE(rst.st_mode) and not stat.S_ISLNK(ust.st_mode):
        return Kind.MODE
    return None


def same_content(a: Path | str, ast: os.stat_result, b: Path | str,
                 bst: os.stat_result) -> bool:
    """Whether the sandbox's ``a`` holds what the real ``b`` does (stats given)."""
    if stat.S_ISLNK(ast.st_mode):
        return os.readlink(a) == os.readlink(b)
    if not stat.S_ISREG(ast.st_mode):
        return (ast.st_mode, ast.st_rdev) == (bst.st_mode, bst.st_rdev)
    if ast.st_size != bst.st_size:
        return False
    try:
        # ``a``, the sandbox's, is opened only if regular (never a device swapped in since
        # the stat); ``b`` is the real file, which the sandbox cannot write.
        with open(open_regular(a), "rb") as fa, open(b, "rb") as fb:
            while True:
                chunk_a = fa.read(1 << 20)
                if chunk_a != fb.read(1 << 20):
                    return False
                if not chunk_a:
                    return True
    except OSError:
        return False


def split(changes: list[Change]) -> tuple[list[Change], list[Change]]:
    """(inside the project, elsewhere on the system)."""
    inside = [c for c in changes if c.in_project]
    outside = [c for c in changes if not c.in_project]
    return inside, outside


def select(changes: list[Change], paths: list[Path]) -> list[Change]:
    """The changes at or below any of ``paths`` (absolute)."""
    if not paths:
        return list(changes)
    return [c for c in changes if any(is_within(c.real_path, p) for p in paths)]


def holds_its_contents(change: Change) -> bool:
    """A new, opaque or replacing directory: reviewed, chosen and applied as one unit with
    everything below it (``review.grouping``, ``commit -p``)."""
    new_dir = change.new_type is EntryType.DIR
    return new_dir and (change.kind is Kind.ADDED or change.opaque or change.kind is Kind.REPLACED)


def select_units(changes: list[Change], paths: list[Path]) -> list[Change]:
    """The changes at exactly ``paths``, with all below those that hold their contents: what
    ``commit -p`` offered as the units chosen (a directory's own change without the changes
    below it, which were offered, and maybe declined, on their own)."""
    chosen = {str(p) for p in paths}
    found: list[Change] = []
    root: str | None = None
    for change in sorted(changes, key=lambda c: c.real_path.replace("/", "\0")):
        if root is not None and is_within(change.real_path, root):
            found.append(change)
            continue
        root = None
        if change.real_path in chosen:
            found.append(change)
            root = change.real_path if holds_its_contents(change) else None
    return found


def holds_a_mask(change: Change, kept: Sequence[str]) -> bool:
    """A directory above a hidden path whose only change is its mode or owner: the engine
    made it to hold the mask's mount point or whiteout (try and the container engines make
    it 0755; $HOME is often 0700), or a command changed it; either way never shown, and
    never applied (review and commit both ask here: attack pass 20)."""
    if change.kind is not Kind.MODE or change.new_type is not EntryType.DIR:
        return False
    return any(is_within(k, change.real_path) and k != change.real_path for k in kept)
