"""What a change carries besides its bytes: extended attributes, and the kinds of entry
that grant power (device nodes, setuid and setgid bits, file capabilities).

Review shows these plainly; commit needs ``--allow-special`` for the powerful ones
(:func:`special`), because a sandboxed root can make them (a container's root
can ``mknod`` a block device or ``setcap`` a binary) and once real they act
outside any sandbox.
"""

from __future__ import annotations

import errno
import os
import stat

from manager.record import Value

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.record
if TYPE_CHECKING:
    from typing import Final

OVERLAY_XATTR_PREFIXES = ("trusted.overlay.", "user.overlay.")
# overlayfs marks each copy-up with its origin (empty when unknown); nothing written
# through the overlay can set or keep it: a file renamed over the path has none.
ORIGIN_XATTRS = ("trusted.overlay.origin", "user.overlay.origin")
LABEL_XATTRS = ("security.selinux",)   # assigned by the policy, not by the file's author
CAPABILITY_XATTR = "security.capability"
OVERFLOW_ID = 65534   # what the kernel shows for an id the namespace does not map


class IdMap(Value):
    """An engine's user namespace: its (inside, on disk, count) ranges for uids and gids.

    Files made inside as other ids carry subordinate ids on disk (100000+N); review
    shows, and commit applies, the id a command inside saw.
    """

    __slots__ = ("uid", "gid")
    uid: Final[tuple[tuple[int, int, int], ...]]
    gid: Final[tuple[tuple[int, int, int], ...]]

    def __init__(self, uid: tuple[tuple[int, int, int], ...],
                 gid: tuple[tuple[int, int, int], ...]) -> None:
        self.uid = uid
        self.gid = gid

    def inside(self, uid: int, gid: int) -> tuple[int, int]:
        return _translate(self.uid, uid), _translate(self.gid, gid)


def _translate(ranges: tuple[tuple[int, int, int], ...], on_disk: int) -> int:
    for inside, first, count in ranges:
        if first <= on_disk < first + count:
            return inside + on_disk - first
    return OVERFLOW_ID


def content_xattrs(path: str | int) -> dict[str, bytes]:
    """The extended attributes of ``path`` (not followed; or a descriptor) that belong to
    the entry: not overlayfs's own, not the security label the policy assigns."""
    follow = isinstance(path, int)  # a descriptor: nothing to follow
    try:
        names = os.listxattr(path, follow_symlinks=follow)
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.ENOENT):
            return {}
        raise
    found = {}
    for name in names:
        if name.startswith(OVERLAY_XATTR_PREFIXES) or name in LABEL_XATTRS:
            continue
        try:
            found[name] = os.getxattr(path, name, follow_symlinks=follow)
        except OSError as exc:
            if exc.errno != errno.ENODATA:
                raise
    return found


def special(path: str, st: os.stat_result) -> tuple[str, ...]:
    """Why the entry at ``path`` needs an explicit decision to become real (empty: none)."""
    mode = st.st_mode
    found = []
    if stat.S_ISBLK(mode) or stat.S_ISCHR(mode):
        kind = "block" if stat.S_ISBLK(mode) else "character"
        found.append(f"{kind} device {os.major(st.st_rdev)},{os.minor(st.st_rdev)} "
                     f"mode {stat.S_IMODE(mode):04o}")
    if not stat.S_ISDIR(mode):
        if mode & stat.S_ISUID:
            found.append("setuid")
        if mode & stat.S_ISGID:
            found.append("setgid")
    if stat.S_ISREG(mode) and _has_capabilities(path):
        found.append("file capabilities")
    return tuple(found)


def _has_capabilities(path: str) -> bool:
    # listxattr, not getxattr: a missing attribute is the common case, and its exception
    # costs more than the names (a commit of 10,000 new files asks 10,000 times).
    try:
        return CAPABILITY_XATTR in os.listxattr(path, follow_symlinks=False)
    except OSError:
        return False


def type_name(mode: int) -> str | None:
    """A name for entries that are neither files, directories nor symlinks."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode):
        return None
    for test, name in ((stat.S_ISBLK, "block device"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return None


def is_copy_up(upper: str) -> bool:
    """Whether the upper entry ``upper`` is the overlay's copy-up of the real entry."""
    for name in ORIGIN_XATTRS:
        try:
            os.getxattr(upper, name, follow_symlinks=False)
            return True
        except OSError:
            continue
    return False


def mark_copy_up(upper: str) -> None:
    """Mark ``upper`` as overlayfs marks a copy-up whose origin it does not know."""
    names = ORIGIN_XATTRS if os.geteuid() == 0 else ORIGIN_XATTRS[1:]
    for name in names if not is_copy_up(upper) else ():
        try:
            os.setxattr(upper, name, b"", follow_symlinks=False)
            return
        except OSError:
            continue  # unmarked (a symlink takes no user.* xattr): a conflict may be reported
