"""Upper directories as tar streams, for engines that keep them out of the host's reach.

The container engines' volume mode holds a session's upper directory inside the
engine (a named volume, possibly in a VM). :func:`unpack` turns the stream the
container's GNU tar writes (``--xattrs``, PAX ``SCHILY.xattr.*`` records) back
into an upper directory the change model reads: whiteouts stay char 0/0 devices
(or, where mknod is refused, empty files marked ``user.overlay.whiteout``) and
opaque directories keep their mark (``trusted.overlay.opaque`` as root, else
``user.overlay.opaque``). :func:`pack` is the way back.

The stream comes from inside the sandbox, so it is untrusted: names must stay
below the destination, nothing is written through a symlink, and no entry
replaces another.
"""

from __future__ import annotations

import os
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO
from typing import TYPE_CHECKING
from typing import Any

from manager.changes.meta import ORIGIN_XATTRS
from manager.changes.meta import OVERLAY_XATTR_PREFIXES
from manager.changes.meta import content_xattrs
from manager.changes.meta import mark_copy_up
from manager.changes.model import is_opaque
from manager.changes.model import is_whiteout
from manager.errors import WorkspaceError
from manager.fs.regular import open_regular
from manager.fs.sparse import data_extents

if TYPE_CHECKING:
    from _typeshed import StrOrBytesPath

XATTR_PREFIX = "SCHILY.xattr."
TRUSTED_OPAQUE = "trusted.overlay.opaque"
USER_OPAQUE = "user.overlay.opaque"
USER_WHITEOUT = "user.overlay.whiteout"


class UnsafeEntry(WorkspaceError):
    pass


class _UpperTar(tarfile.TarFile):
    """Extraction that keeps overlay whiteouts and opaque marks."""

    def makedev(self, tarinfo: tarfile.TarInfo, targetpath: StrOrBytesPath) -> None:
        if tarinfo.ischr() and tarinfo.devmajor == 0 and tarinfo.devminor == 0:
            make_whiteout(os.fsdecode(targetpath))
        else:
            super().makedev(tarinfo, targetpath)

    def makedir(self, tarinfo: tarfile.TarInfo, targetpath: StrOrBytesPath) -> None:
        super().makedir(tarinfo, targetpath)
        if tarinfo.pax_headers.get(XATTR_PREFIX + TRUSTED_OPAQUE) == "y" or \
                tarinfo.pax_headers.get(XATTR_PREFIX + USER_OPAQUE) == "y":
            set_opaque(os.fsdecode(targetpath))

    def utime(self, tarinfo: tarfile.TarInfo, targetpath: StrOrBytesPath) -> None:
        # Last of the metadata steps (chown and chmod would clear file capabilities).
        super().utime(tarinfo, targetpath)
        set_content_xattrs(tarinfo, os.fsdecode(targetpath))


def set_content_xattrs(tarinfo: tarfile.TarInfo, path: str) -> None:
    """The entry's own xattrs (``user.*``, ``security.capability``): review shows them.

    A capability the host user may not set (not root) stays behind in the
    engine's volume: it never reaches the real files, so nothing is lost that
    review would have to show.
    """
    if any(XATTR_PREFIX + name in tarinfo.pax_headers for name in ORIGIN_XATTRS):
        mark_copy_up(path)   # the commit's conflict check reads it (commit.plan)
    for key, value in tarinfo.pax_headers.items():
        name = key[len(XATTR_PREFIX):]
        if not key.startswith(XATTR_PREFIX) or name.startswith(OVERLAY_XATTR_PREFIXES):
            continue
        try:
            os.setxattr(path, name, value.encode("utf-8", "surrogateescape"),
                        follow_symlinks=False)
        except PermissionError:
            if not name.startswith("security."):
                raise


def make_whiteout(path: str) -> None:
    """A char 0/0 device; without the privilege, the xattr form overlayfs also reads."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o000, os.makedev(0, 0))
    except PermissionError:
        with open(path, "x"):
            pass
        os.setxattr(path, USER_WHITEOUT, b"y", follow_symlinks=False)


def set_opaque(path: str) -> None:
    """trusted.* as root; root without CAP_SYS_ADMIN (in a container) gets the user.* form too."""
    if os.geteuid() == 0:
        try:
            os.setxattr(path, TRUSTED_OPAQUE, b"y", follow_symlinks=False)
            return
        except PermissionError:
            pass
    os.setxattr(path, USER_OPAQUE, b"y", follow_symlinks=False)


SIDE_LIMIT = 64 << 20   # bytes a side file (e.g. birth times) may hold
# extractall(filter=) came with 3.11.4 (and 3.8.17, 3.9.17, 3.10.12); so did tarfile.data_filter.
HAS_FILTER = hasattr(tarfile, "data_filter")


def unpack(stream: IO[bytes], dest: Path, root: str = ".") -> dict[str, bytes]:
    """Extract the upper directory ``root`` of a tar stream into the empty directory ``dest``.

    Other regular files at the top of the stream (a stream made with ``-C DIR upper
    births``) are side files: returned by name, never written.
    """
    dest.mkdir(parents=True, exist_ok=True)
    side: dict[str, bytes] = {}
    with _UpperTar.open(fileobj=stream, mode="r|") as tar:
        def keep(member: tarfile.TarInfo, _path: str = "") -> tarfile.TarInfo | None:
            name = _safe_name(member.name)
            inside, rel = _below(name, root)
            if not inside:
                _side_file(tar, member, name, side)
                return None
            return _checked(member, rel, root, dest)
        if HAS_FILTER:
            tar.extractall(dest, filter=keep)
        else:   # Python < 3.11.4 (Debian 12's 3.11.2): the same check, member by member
            checked = (m for m in map(keep, tar) if m is not None)
            tar.extractall(dest, members=checked)
    return side


def _below(name: str | None, root: str) -> tuple[bool, str | None]:
    """(inside ``root``, ``name`` relative to it: None for the root itself)."""
    if root == ".":
        return True, name
    if name == root:
        return True, None
    if name is not None and name.startswith(root + "/"):
        return True, name[len(root) + 1:]
    return False, None


def _side_file(tar: tarfile.TarFile, member: tarfile.TarInfo, name: str | None,
               side: dict[str, bytes]) -> None:
    if name is None or "/" in name or not member.isreg() or member.size > SIDE_LIMIT:
        raise UnsafeEntry(f"upper stream: unexpected entry {member.name!r}")
    data = tar.extractfile(member)
    side[name] = data.read() if data is not None else b""


def _checked(member: tarfile.TarInfo, name: str | None, root: str,
             dest: Path) -> tarfile.TarInfo | None:
    if name is None:
        return None   # the root itself
    target = dest / name
    _no_links_above(dest, name)
    if os.path.lexists(target):
        raise UnsafeEntry(f"upper stream: {member.name!r} appears twice")
    if member.islnk():
        inside, link = _below(_safe_name(member.linkname), root)
        if not inside or link is None or not (dest / link).is_file() or \
                (dest / link).is_symlink():
            raise UnsafeEntry(f"upper stream: bad hard link {member.name!r}")
        _no_links_above(dest, link)
        member.linkname = link
    member.name = name
    return member


def _safe_name(raw: str) -> str | None:
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if raw.startswith("/") or ".." in parts:
        raise UnsafeEntry(f"upper stream: unsafe name {raw!r}")
    return "/".join(parts) or None


def _no_links_above(dest: Path, name: str) -> None:
    current = dest
    for part in name.split("/")[:-1]:
        current = current / part
        if current.is_symlink() or (current.exists() and not current.is_dir()):
            raise UnsafeEntry(f"upper stream: {name!r} would be written through {current}")


def pack(upper: Path, stream: IO[bytes]) -> None:
    """Write ``upper`` as a tar stream the container's GNU tar extracts (as root)."""
    with tarfile.open(fileobj=stream, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for path, arcname in _entries(upper):
            info = _info(tar, path, arcname)
            if info.isreg():
                with open(open_regular(path), "rb") as f:
                    extents = data_extents(f.fileno(), info.size)
                    if sum(end - start for start, end in extents) < info.size:
                        _add_sparse(tar, info, f.fileno(), extents)
                    else:
                        tar.addfile(info, f)
            else:
                tar.addfile(info)


def _add_sparse(tar: tarfile.TarFile, info: tarfile.TarInfo, fd: int,
                extents: list[tuple[int, int]]) -> None:
    """A file with holes in GNU's sparse format 1.0 (PAX): a map of its data extents, then
    their bytes only. Its full length of zeros would fill the engine's disk."""
    size = info.size
    if not extents or extents[-1][1] < size:
        extents = [*extents, (size, size)]  # GNU tar's mark of a trailing hole
    lines = [str(len(extents)), *(f"{start}\n{end - start}" for start, end in extents)]
    mapped = ("\n".join(lines) + "\n").encode()
    mapped += b"\0" * (-len(mapped) % tarfile.BLOCKSIZE)
    info.pax_headers = {**info.pax_headers, "GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                        "GNU.sparse.name": info.name, "GNU.sparse.realsize": str(size)}
    head, _, tail = info.name.rpartition("/")
    info.name = f"{head}/GNUSparseFile.0/{tail}" if head else f"GNUSparseFile.0/{tail}"
    info.size = len(mapped) + sum(end - start for start, end in extents)
    tar.addfile(info, _SparseData(fd, mapped, extents))


class _SparseData:
    """What tarfile reads for a sparse member: the map, then each extent's bytes."""

    def __init__(self, fd: int, mapped: bytes, extents: list[tuple[int, int]]) -> None:
        self.fd, self.head, self.extents = fd, mapped, list(extents)

    def read(self, n: int = 1 << 20, /) -> bytes:
        """Exactly ``n`` bytes unless the member ends first (tarfile insists on full reads)."""
        parts = []
        while n > 0 and (self.head or self.extents):
            chunk = self._next(n)
            parts.append(chunk)
            n -= len(chunk)
        return b"".join(parts)

    def _next(self, n: int) -> bytes:
        if self.head:
            chunk, self.head = self.head[:n], self.head[n:]
            return chunk
        start, end = self.extents[0]
        chunk = os.pread(self.fd, min(n, end - start), start) if start < end else b""
        if chunk:
            self.extents[0] = (start + len(chunk), end)
        else:
            self.extents.pop(0)   # done (or the file shrank: tarfile reports the short member)
        return chunk


def _entries(root: Path) -> Iterator[tuple[Path, str]]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel = os.path.relpath(dirpath, root)
        for name in sorted(dirnames + filenames):
            yield Path(dirpath, name), name if rel == "." else f"{rel}/{name}"


def _info(tar: tarfile.TarFile, path: Path, arcname: str) -> tarfile.TarInfo:
    st = os.lstat(path)
    info = tar.gettarinfo(str(path), arcname)
    if is_whiteout(path, st):
        info.type, info.size, info.devmajor, info.devminor = tarfile.CHRTYPE, 0, 0, 0
        info.mode = 0
        return info
    headers: dict[str, Any] = dict(info.pax_headers)
    for name, value in content_xattrs(str(path)).items():
        headers[XATTR_PREFIX + name] = value.decode("utf-8", "surrogateescape")
    if stat.S_ISDIR(st.st_mode) and is_opaque(path):
        headers[XATTR_PREFIX + TRUSTED_OPAQUE] = "y"
    info.pax_headers = headers
    return info

