"""What commit applies is what review showed: every entry, each attribute commit applies.

``session/reviewed`` refuses an entry whose ctime moved after the last review and call.
A write through a shared mapping moves no time while its page stays dirty (the times
move on the write fault of a clean page, so only after a writeback), so a process a
call left running (the container engines keep them) can change a file's bytes after
``workspace diff`` showed them, with the times of before; in volume mode no time says
anything (the export rewrites the host's upper), and a symlink retargeted (``ln -sfn``)
or a mode changed keeps every name. Times cannot close that class; the entries can:
each review (status, diff) records, for every upper entry of the changes (all below a
summarised new directory too), walked before anything is shown, each attribute commit
applies (commit/steps.py): the type and mode (permission bits with setuid, setgid and
sticky), the device number, owner and group where commit applies them (as root), the
content xattrs (changes/meta.py) and a directory's opaque mark, a symlink's target and
a regular file's content digest. Commit, with the sandbox stopped, refuses a path whose
entry is not what the record holds while that review is current: no call has started or
ended since (a call after it made changes the user commits unseen by choice, as without
any review). Times are applied too and not compared: they grant nothing.

Every engine, not only where a process can outlive its call (the container engines'
``running/``): overlay and try end a call's processes with it, but a write into the sandbox
needs no process of the session, only a descriptor of its overlay, and a call can hand one
to a process of another session (an abstract unix socket, shared by every sandbox on the
host's network: attack pass 15). There the record is current while no call has started
since (each call's entry touches ``last-used``), and an entry the review did not read
(made since, below a reviewed new directory too) is refused as well: the absence of the
session's processes is not the absence of writers.
The record is versioned (``VERSION``): one of an older format, current, makes commit
refuse every path (review again), never accept what it did not record.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path

from manager.changes.model import Change
from manager.changes.model import EntryType
from manager.changes.model import ancestors
from manager.changes.model import is_within
from manager.fs.regular import open_regular
from manager.session.store import Session

RECORD = "shown"         # in the sandbox directory: the last review's entries
CALLS = "running"        # the container engines' host-side call records (session/reviewed)
# Touched by each call's entry as it starts: overlay's, try's (in its ``ws``, try_/layout.py).
STARTED = ("last-used", "ws/last-used")
VERSION = b"v2"          # the record's format: entries with all their attributes


Shown = list[tuple[str, str, str]]   # (upper, real, entry) of each entry the review read


def digests(found: list[Change]) -> Shown:
    """What ``found`` holds now: each upper entry's attributes, a regular file's digest
    among them (``commit -p``'s prompt keeps them in memory: what it offered whole is
    compared under the lock)."""
    return [(upper, real, entry(upper)) for upper, real in _entries(found)]


class Review:
    """The last review's record (no NamedTuple: status imports this module at start-up,
    and typing costs more than the whole command should)."""

    __slots__ = ("files", "names", "stale")

    def __init__(self, files: Shown, names: set[str] | None, stale: bool = False) -> None:
        self.files = files
        self.names = names   # every upper entry it read: commit refuses any other
        self.stale = stale   # an older format's record: it holds too little to compare


def record(session: Session, found: list[Change]) -> None:
    """A review walked ``found`` (all the changes, before any selection): record each
    entry's attributes, before anything of them is shown."""
    calls = _calls(session)
    if calls is None:
        return
    _write(session, calls, digests(found))


def _write(session: Session, calls: int, files: Shown) -> None:
    # NUL-separated (no name or target holds one): 10,000 files, a third of JSON's time.
    fields = [os.fsencode(f) for item in files for f in item]
    head = b"%s %d %d\n" % (VERSION, calls, len(fields))
    tmp = session.sandbox / f".{RECORD}.tmp"
    with contextlib.suppress(OSError):    # never a reason for review to fail: commit refuses
        tmp.write_bytes(head + b"\0".join(fields))
        os.replace(tmp, session.sandbox / RECORD)


def without(seen: Review, reals: set[str]) -> Review:
    """``seen`` without the entries at or below ``reals`` (real paths: a tree step's below
    it): a resumed commit finished them, by its hand."""
    below = tuple(r.rstrip("/") + "/" for r in reals)
    files = [item for item in seen.files if item[1] not in reals and not item[1].startswith(below)]
    names = None if seen.names is None else {upper for upper, _, _ in files}
    return Review(files, names, seen.stale)


def forget_gone(session: Session, applied: Iterable[str] = (), dropped: Iterable[str] = (),
                everything: bool = False) -> None:
    """After a commit or a discard ran (the sandbox stopped, the lock held): the record's
    entries it removed from the upper leave the record -- those gone that are a real path
    it ``applied``, or at or below one it ``dropped`` (discarded: all below goes with it),
    or on the way to either (a parent it tidied away); ``everything``: it dropped all. Any
    other entry that goes stays, and the next commit refuses it (attack pass 23: an entry
    review showed, removed after it, left the rest to apply alone; passes 24 and 25: a
    ``commit PATH`` then forgot it, a sibling, or an entry below a new parent it made)."""
    seen = current(session)
    calls = _calls(session)
    if seen is None or seen.stale or calls is None:
        return
    ours = None if everything else _handled(applied, dropped)
    kept = [item for item in seen.files
            if not (_gone(item[0]) and (ours is None or ours(item[1])))]
    if len(kept) != len(seen.files):
        _write(session, calls, kept)


def _handled(applied: Iterable[str], dropped: Iterable[str]) -> Callable[[str], bool]:
    """Whether a real path is one ``applied``, at or below one ``dropped``, or above either."""
    exact = {r.rstrip("/") or "/" for r in (*applied, *dropped)}
    above = {a for r in exact for a in ancestors(r)}
    under = tuple((r.rstrip("/") or "") + "/" for r in dropped)
    return lambda real: real in exact or real in above or bool(under) and real.startswith(under)


def _gone(path: str) -> bool:
    try:
        os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False   # unreadable, too long: kept (commit compares it as it can)
    return False


def current(session: Session) -> Review | None:
    """The last review's record while it is current (no call started or ended since),
    else None. Read before the engine is released (that may tidy ``running/``)."""
    calls = _calls(session)
    if calls is None:
        return None
    try:
        head, _, body = (session.sandbox / RECORD).read_bytes().partition(b"\n")
        words = head.split()
        if words[0] != VERSION:   # older ("<calls> <files> <names>") or unknown: too little
            old = not words[0].startswith(b"v") and int(words[0]) != calls
            return None if old else Review([], None, stale=True)
        if int(words[1]) != calls:
            return None
    except (OSError, ValueError, IndexError):
        return None
    fields = [os.fsdecode(f) for f in body.split(b"\0")] if body else []
    if len(fields) != int(words[2]):   # not as written: it cannot say what review read
        return Review([], None, stale=True)
    files = list(zip(fields[0::3], fields[1::3], fields[2::3], strict=False))
    # Where no time says what changed since (volume mode, and overlay and try, which keep no
    # call records): what the review read by name, so that anything else is refused.
    return Review(files, {upper for upper, _, _ in files})


def late(seen: Review, applying: list[Change], paths: Sequence[Path] = ()) -> list[str]:
    """The real paths commit must not apply on ``seen``. ``applying``: every entry this
    commit applies, as commit itself read them (the paths chosen, the new parents they need,
    each entry a tree step carries: attack pass 22); ``paths``: those named (none: all).
    Refused: an entry the review read, within ``paths`` or applied, that is not what it read
    (an attribute changed, replaced, or gone: what commit or discard removed itself has left
    the record, ``forget_gone``); an applied entry whose name the record lacks; or every
    applied one, for a record too old to tell."""
    entries = list(_entries(applying))
    reals = {real for _, real in entries}
    if seen.stale:
        return sorted(reals)
    found = {real for upper, real, was in seen.files
             if (real in reals or _within(real, list(paths))) and entry(upper) != was}
    if seen.names is not None:
        found.update(real for upper, real in entries if upper not in seen.names)
    return sorted(found)


def changed(shown: Shown, paths: list[Path]) -> list[str]:
    """The real paths (within ``paths``, if any) of the shown entries that are not what
    the review read: an attribute changed, replaced or gone (unreadable then and now: equal)."""
    late = []
    for upper, real, was in shown:
        if _within(real, paths) and entry(upper) != was:
            late.append(real)
    return sorted(late)


def entry(path: str) -> str:
    """Every attribute of the entry at ``path`` that commit applies, as one string ("" when
    there is none): mode with type, device, owner (as root: only root's commit applies it),
    xattrs, then a symlink's target or a regular file's digest (last: it may hold spaces)."""
    try:
        st = os.lstat(path)
    except OSError:
        return ""
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        try:
            what = os.readlink(path)
        except OSError:
            return ""
    elif stat.S_ISREG(mode):
        what = _digest(path)
    else:
        what = ""
    dev = st.st_rdev if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else 0
    owner = f"{st.st_uid}:{st.st_gid}" if os.geteuid() == 0 else "-"
    return f"{mode:o} {dev} {owner} {_xattrs(path, stat.S_ISDIR(mode))} {what}"


def _xattrs(path: str, directory: bool) -> str:
    """A digest of the entry's content xattrs (and a directory's opaque mark); "-": none."""
    try:
        if not os.listxattr(path, follow_symlinks=False):
            return "-"
        from manager.changes.meta import content_xattrs
        from manager.changes.model import OPAQUE_XATTRS

        found = sorted(content_xattrs(path).items())
        if directory:
            for name in OPAQUE_XATTRS:
                with contextlib.suppress(OSError):
                    found.append((name, os.getxattr(path, name, follow_symlinks=False)))
    except OSError as exc:
        return "-" if exc.errno in (errno.ENOTSUP, errno.ENOENT) else "?"
    if not found:
        return "-"
    from _blake2 import blake2b

    h = blake2b(digest_size=16)
    for name, value in found:
        h.update(os.fsencode(name) + b"\0" + len(value).to_bytes(8, "little") + value)
    return h.hexdigest()


def _within(real: str, paths: list[Path]) -> bool:
    return not paths or any(is_within(Path(real), p) for p in paths)


def _calls(session: Session) -> int | None:
    """When a call last started or ended (the container engines' records' directory's
    mtime), or last started (overlay's and try's ``last-used``); None before any call."""
    for name in (CALLS, *STARTED):
        with contextlib.suppress(OSError):
            return os.stat(session.sandbox / name).st_mtime_ns
    return None


def _entries(found: list[Change]) -> Iterator[tuple[str, str]]:
    """(upper, real) of every entry the changes apply, all below a summarised new
    directory included (what it holds is applied too)."""
    for change in found:
        yield change.upper_path, change.real_path
        if change.new_type is EntryType.DIR and change.below is not None:
            yield from _below(change.upper_path, change.real_path)


def _below(upper: str, real: str) -> Iterator[tuple[str, str]]:
    """(upper, real) of every entry below ``upper``."""
    todo = [(upper, real)]
    while todo:   # iterative: no depth limit
        here, there = todo.pop()
        with contextlib.suppress(OSError), os.scandir(here) as found:
            for item in found:
                yield item.path, f"{there}/{item.name}"
                with contextlib.suppress(OSError):
                    if item.is_dir(follow_symlinks=False):
                        todo.append((item.path, f"{there}/{item.name}"))


def _digest(path: str) -> str:
    """A digest of the file's bytes; "" when it is not a readable regular file. By
    blocks, runs of zero blocks counted, so a hole costs a seek, not its size, and the
    digest is the same however the file system lays the zeros out."""
    try:
        fd = open_regular(path)   # never a device, fifo or socket the sandbox made
    except OSError:
        return ""
    # blake2b straight from its C module: hashlib would load OpenSSL (status's start-up).
    from _blake2 import blake2b

    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return ""
        h = blake2b(st.st_size.to_bytes(8, "little"), digest_size=20)
        zeros = 0
        sparse = st.st_blocks * 512 < st.st_size
        blocks: Iterable[bytes | int]
        if sparse or st.st_size > BLOCK:
            blocks = _blocks(fd, st.st_size, sparse)
        else:   # most files: one read
            blocks = [blake2b(os.pread(fd, BLOCK, 0), digest_size=20).digest()] \
                if st.st_size else []
        for block in blocks:
            if isinstance(block, int) or block == _zero():
                zeros += block if isinstance(block, int) else 1
                continue
            if zeros:
                h.update(b"Z" + zeros.to_bytes(8, "little"))
                zeros = 0
            h.update(b"D" + block)
        if zeros:
            h.update(b"Z" + zeros.to_bytes(8, "little"))
        return h.hexdigest()
    except OSError:
        return ""
    finally:
        os.close(fd)


def _blocks(fd: int, size: int, sparse: bool) -> Iterator[bytes | int]:
    """Each block's digest, or a count of whole blocks in a hole (read, a block of zeros
    has the digest ``_ZERO``: counted alike)."""
    from _blake2 import blake2b

    at = 0
    while at < size:
        if sparse:
            try:
                data = os.lseek(fd, at, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno not in (errno.ENXIO, errno.EINVAL):
                    raise
                data = size if exc.errno == errno.ENXIO else at
                sparse = exc.errno == errno.ENXIO
            holes = (min(data, size) - at) // BLOCK
            if holes:
                yield holes
                at += holes * BLOCK
                continue
        chunk = os.pread(fd, BLOCK, at)
        if not chunk:
            return
        yield blake2b(chunk, digest_size=20).digest()
        at += len(chunk)


BLOCK = 1 << 20
_ZEROS: list[bytes] = []


def _zero() -> bytes:
    """The digest of a block of zeros (computed once, when first needed)."""
    if not _ZEROS:
        from _blake2 import blake2b

        _ZEROS.append(blake2b(bytes(BLOCK), digest_size=20).digest())
    return _ZEROS[0]
