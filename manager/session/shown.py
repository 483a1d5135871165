"""What commit applies is what review showed: the content of every file, by digest.

``session/reviewed`` refuses an entry whose ctime moved after the last review and call.
A write through a shared mapping moves no time while its page stays dirty (the times
move on the write fault of a clean page, so only after a writeback), so a process a
call left running (the container engines keep them) can change a file's bytes after
``workspace diff`` showed them, with the times of before. Times cannot close that class;
content can: each review (status, diff) records a digest of every regular file of the
changes, walked before anything is shown (a later write makes a mismatch: refused, never
applied unseen), and commit, with the sandbox stopped, refuses a file whose content no
longer matches while that review is current: no call has started or ended since (a call
after it made changes the user commits unseen by choice, as without any review).

Only where a process can outlive its call (the container engines' ``running/``): overlay
and try end a call's processes with it, so nothing writes between a review and a commit.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable
from collections.abc import Iterator
from pathlib import Path

from manager.changes.model import Change
from manager.changes.model import EntryType
from manager.changes.model import is_within
from manager.session.store import Session

RECORD = "shown"         # in the sandbox directory: the last review's digests
CALLS = "running"        # the container engines' host-side call records (session/reviewed)


Shown = list[tuple[str, str, str]]   # (upper, real, digest) of each file the review read


def digests(found: list[Change]) -> Shown:
    """What ``found`` holds now: each regular file's digest (``commit -p``'s prompt keeps
    them in memory: what it offered whole is compared under the lock)."""
    return [(upper, real, _digest(upper)) for upper, real in _files(found)]


class Review:
    """The last review's record (no NamedTuple: status imports this module at start-up,
    and typing costs more than the whole command should)."""

    __slots__ = ("files", "names")

    def __init__(self, files: Shown, names: set[str] | None) -> None:
        self.files = files
        self.names = names   # volume mode: every upper entry it read (no times to tell)


def record(session: Session, found: list[Change]) -> None:
    """A review walked ``found`` (all the changes, before any selection): record the
    digests of their files, before anything of them is shown; in volume mode also every
    entry's name (there the times say nothing of what was added after the review)."""
    calls = _calls(session)
    if calls is None:
        return
    # NUL-separated (no name holds one): 10,000 files, a third of JSON's time.
    fields = [os.fsencode(f) for entry in digests(found) for f in entry]
    names = [os.fsencode(n) for n in _names(found)] if _in_volume(session) else None
    head = b"%d %d %d\n" % (calls, len(fields), -1 if names is None else len(names))
    tmp = session.sandbox / f".{RECORD}.tmp"
    with contextlib.suppress(OSError):    # never a reason for review to fail: commit refuses
        tmp.write_bytes(head + b"\0".join([*fields, *(names or [])]))
        os.replace(tmp, session.sandbox / RECORD)


def current(session: Session) -> Review | None:
    """The last review's record while it is current (no call started or ended since),
    else None. Read before the engine is released (that may tidy ``running/``)."""
    calls = _calls(session)
    if calls is None:
        return None
    try:
        head, _, body = (session.sandbox / RECORD).read_bytes().partition(b"\n")
        when, nfields, nnames = (int(n) for n in head.split())
        if when != calls:
            return None
    except (OSError, ValueError):
        return None
    fields = [os.fsdecode(f) for f in body.split(b"\0")] if body else []
    files = fields[:nfields]
    return Review(list(zip(files[0::3], files[1::3], files[2::3], strict=False)),
                  None if nnames < 0 else set(fields[nfields:]))


def changed(shown: Shown, paths: list[Path]) -> list[str]:
    """The real paths (within ``paths``, if any) of the shown files whose content is not
    what the review read: changed, replaced or gone (unreadable then and now: equal)."""
    late = []
    for upper, real, digest in shown:
        if _within(real, paths) and _digest(upper) != digest:
            late.append(real)
    return sorted(late)


def added(names: set[str], found: list[Change], paths: list[Path]) -> list[str]:
    """The real paths (within ``paths``, if any) of changes the review did not read."""
    return sorted(c.real_path for c in found
                  if c.upper_path not in names and _within(c.real_path, paths))


def _within(real: str, paths: list[Path]) -> bool:
    return not paths or any(is_within(Path(real), p) for p in paths)


def _in_volume(session: Session) -> bool:
    from manager.engines.container.upper import in_volume

    return in_volume(session)


def _names(found: list[Change]) -> Iterator[str]:
    """The upper entry of every change, and all below a summarised new directory."""
    for change in found:
        yield change.upper_path
        if change.new_type is EntryType.DIR and change.below is not None:
            yield from (upper for upper, _ in _below(change.upper_path, "", every=True))


def _calls(session: Session) -> int | None:
    """When a call last started or ended (the records' directory's mtime); None where no
    process outlives its call."""
    try:
        return os.stat(session.sandbox / CALLS).st_mtime_ns
    except OSError:
        return None


def _files(found: list[Change]) -> Iterator[tuple[str, str]]:
    """(upper, real) of every regular file the changes apply, a summarised new directory's
    included (what it holds is applied too)."""
    for change in found:
        if change.new_type is EntryType.FILE:
            yield change.upper_path, change.real_path
        elif change.new_type is EntryType.DIR and change.below is not None:
            yield from _below(change.upper_path, change.real_path)


def _below(upper: str, real: str, every: bool = False) -> Iterator[tuple[str, str]]:
    """(upper, real) of the regular files below ``upper`` (``every``: of all entries)."""
    todo = [(upper, real)]
    while todo:   # iterative: no depth limit
        here, there = todo.pop()
        with contextlib.suppress(OSError), os.scandir(here) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        todo.append((entry.path, f"{there}/{entry.name}"))
                        if every:
                            yield entry.path, f"{there}/{entry.name}"
                    elif every or entry.is_file(follow_symlinks=False):
                        yield entry.path, f"{there}/{entry.name}"


def _digest(path: str) -> str:
    """A digest of the file's bytes; "" when it is not a readable regular file. By
    blocks, runs of zero blocks counted, so a hole costs a seek, not its size, and the
    digest is the same however the file system lays the zeros out."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    import hashlib  # only the container engines record digests: not at status's start-up

    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return ""
        h = hashlib.blake2b(st.st_size.to_bytes(8, "little"), digest_size=20)
        zeros = 0
        sparse = st.st_blocks * 512 < st.st_size
        blocks: Iterable[bytes | int]
        if sparse or st.st_size > BLOCK:
            blocks = _blocks(fd, st.st_size, sparse)
        else:   # most files: one read
            blocks = [hashlib.blake2b(os.pread(fd, BLOCK, 0), digest_size=20).digest()] \
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
    import hashlib

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
        yield hashlib.blake2b(chunk, digest_size=20).digest()
        at += len(chunk)


BLOCK = 1 << 20
_ZEROS: list[bytes] = []


def _zero() -> bytes:
    """The digest of a block of zeros (computed once, when first needed)."""
    if not _ZEROS:
        import hashlib

        _ZEROS.append(hashlib.blake2b(bytes(BLOCK), digest_size=20).digest())
    return _ZEROS[0]
