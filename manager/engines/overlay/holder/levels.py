"""Bring a snapshotted directory of the overlay sandbox up to date (stdlib only).

A directory with mounts below it is shown from a *skeleton* (its entries copied one
level deep, see ``build.Builder``). When its real entries change, the holder
updates the skeleton and swaps the directory's overlay for a new one: overlayfs caches
lookups and directory listings, so a lower layer changed under a mounted overlay is
not reliably seen (and is undefined); a new mount starts with empty caches. The swap
is atomic for path lookups: the new overlay is mounted *beneath* the old one
(``move_mount(MOVE_MOUNT_BENEATH)``, Linux 6.5), the entries mounted on the old one
(per-entry overlays, binds, deeper snapshots) are moved onto it -- moved, not copied,
so a running command whose working directory lies in one keeps it -- and the old one
is detached. What the sandbox wrote stays on top: the upper directory is the same.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import stat
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Protocol

from . import masklayer
from . import mountinfo

if TYPE_CHECKING:
    from collections.abc import Callable
    from collections.abc import Iterator

AT_FDCWD = -100
AT_RECURSIVE = 0x8000
FSOPEN_CLOEXEC = 0x1
FSCONFIG_SET_FLAG = 0
FSCONFIG_SET_STRING = 1
FSCONFIG_CMD_CREATE = 6
FSMOUNT_CLOEXEC = 0x1
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOVE_MOUNT_BENEATH = 0x200
OPEN_TREE_CLONE = 0x1
OPEN_TREE_CLOEXEC = 0o2000000
MOUNT_ATTR_RDONLY = 0x1
MNT_DETACH = 0x2
CLONE_NEWNS = 0x00020000
# The same numbers on every architecture (the unified table for system calls from 5.x on).
SYS_OPEN_TREE = 428
SYS_MOVE_MOUNT = 429
SYS_FSOPEN = 430
SYS_FSCONFIG = 431
SYS_FSMOUNT = 432
SYS_MOUNT_SETATTR = 442

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class Skeletons(Protocol):
    """What a refresh needs of the holder's ``Builder``."""

    real_prefix: str
    host_ns: int   # the host's mount namespace (the holder lives in the pivoted one), or -1
    own_ns: int    # the pivoted one
    skeleton: Path
    upper: Path
    mounts: list[str]
    log: list[str]
    hidden: frozenset[str]   # paths mounted over (holder/hide.py): never shown, their mounts kept
    masks: masklayer.MaskLayers   # the lower layer above a real one that leaves them out

    def at(self, base: Path, point: str) -> Path: ...
    def skeleton_entry(self, real: str, copy: Path) -> str: ...
    def make_upper(self, point: str) -> int: ...
    def work_dir(self, point: str) -> Path: ...
    def has_mounts_below(self, path: str) -> bool: ...


def _check(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return result


def _syscall(number: int, *args: object) -> int:
    return int(_libc.syscall(number, *args))


def overlay_fd(lower: str, upper: str, work: str) -> int:
    """A new, detached overlay mount (fsopen/fsconfig/fsmount)."""
    fs = _check(_syscall(SYS_FSOPEN, b"overlay", FSOPEN_CLOEXEC), "fsopen overlay")
    try:
        for key, value in (("lowerdir", lower), ("upperdir", upper), ("workdir", work),
                           ("index", "off")):
            _check(_syscall(SYS_FSCONFIG, fs, FSCONFIG_SET_STRING, key.encode(),
                            os.fsencode(value), 0), f"overlay option {key}={value}")
        _check(_syscall(SYS_FSCONFIG, fs, FSCONFIG_SET_FLAG, b"userxattr", None, 0), "userxattr")
        _check(_syscall(SYS_FSCONFIG, fs, FSCONFIG_CMD_CREATE, None, None, 0), "overlay create")
        return _check(_syscall(SYS_FSMOUNT, fs, FSMOUNT_CLOEXEC, 0), "fsmount")
    finally:
        os.close(fs)


def bind_fd(real: str, readonly: bool) -> int:
    fd = _check(_syscall(SYS_OPEN_TREE, AT_FDCWD, os.fsencode(real),
                         OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC), f"bind {real}")
    if readonly:
        attr = (ctypes.c_uint64 * 4)(MOUNT_ATTR_RDONLY, 0, 0, 0)
        try:
            _check(_syscall(SYS_MOUNT_SETATTR, fd, b"", 0x1000, ctypes.byref(attr), ctypes.sizeof(attr)),
                   f"read-only bind {real}")   # 0x1000: AT_EMPTY_PATH
        except OSError:
            os.close(fd)
            raise
    return fd


def attach(fd: int, to_dir: int, to_path: str, flags: int = 0) -> None:
    _check(_syscall(SYS_MOVE_MOUNT, fd, b"", to_dir, os.fsencode(to_path),
                    MOVE_MOUNT_F_EMPTY_PATH | flags), f"mount on {to_path}")


def move(point: str, to_dir: int, to_path: str) -> None:
    _check(_syscall(SYS_MOVE_MOUNT, AT_FDCWD, os.fsencode(point), to_dir, os.fsencode(to_path), 0),
           f"move {point}")


def move_child(point: str, to_dir: int, to_path: str) -> None:
    """``move`` of a mount from the old overlay onto its replacement; one whose path is gone
    (a daemon's socket removed outside since it was bound) is not moved: it goes with the
    old one, as the file went outside."""
    with contextlib.suppress(FileNotFoundError):
        move(point, to_dir, to_path)


def detach(point: str) -> None:
    _check(_libc.umount2(os.fsencode(point), MNT_DETACH), f"detach {point}")


def child_mounts(point: str) -> list[str] | None:
    """Mount points of the mounts directly on the topmost mount at ``point``, shallowest first;
    None when nothing is mounted there (any more)."""
    rows = [(mid, parent, p) for mid, parent, p, _ in mountinfo.rows(mountinfo.read())]
    here = {mid for mid, _, p in rows if p == point}
    tops = here - {parent for _, parent, p in rows if p == point}
    if not tops:
        return None
    if len(tops) != 1:
        raise RuntimeError(f"{point}: expected one mount on top there, found {len(tops)}")
    top = tops.pop()
    return sorted((p for _, parent, p in rows if parent == top and p != point),
                  key=lambda p: p.count("/"))


def refresh(builder: Skeletons, level: str, names: set[str]) -> None:
    """Bring ``level`` (a snapshotted directory, not "/") up to date for ``names``."""
    skeleton = builder.at(builder.skeleton, level)
    real = builder.real_prefix + level
    children = child_mounts(level)
    if children is None or not os.path.isdir(real):
        return   # gone (e.g. a container's storage): its parent's refresh says so
    lost = "" in names   # the watch lost track (its queue overflowed): everything
    if lost:
        names = set(os.listdir(real)) | set(os.listdir(skeleton))
    names = {n for n in names if os.path.join(level, n) not in builder.hidden}   # moved as they are
    had_dir = {n for n in names if (skeleton / n).is_dir() and not (skeleton / n).is_symlink()}
    kinds = {name: _update(builder, os.path.join(real, name), skeleton / name) for name in names}
    # A directory with host mounts below keeps its mount: those mounts are not the watch's.
    # Without events (lost), a directory that is still there is taken to be the same one.
    redo = {n: k for n, k in kinds.items()
            if k in ("dir", "bind") and not builder.has_mounts_below(os.path.join(level, n))
            and not (lost and k == "dir" and n in had_dir)}
    try:
        with upper_of(builder, level) as upper, host_view(builder):
            new = overlay_fd(str(skeleton), upper, str(builder.work_dir(level)))
    except FileNotFoundError:
        if os.path.isdir(real):
            raise
        return   # gone while we looked (a container's layer under /var/lib/docker): as above
    try:
        attach(new, AT_FDCWD, level, MOVE_MOUNT_BENEATH)
        for point in children:
            rel = os.path.relpath(point, level)
            first = rel.split("/")[0]
            if first not in names or (kinds[first] == "dir" and first not in redo):
                move_child(point, new, rel)
        for name, kind in redo.items():
            _mount_entry(builder, level, name, kind, new)
        detach(level)   # the old one, on top
    finally:
        os.close(new)


def refresh_entry(builder: Skeletons, point: str) -> None:
    """A fresh overlay of ``point`` (a plain overlay of the real directory, not a level)
    with the same layers, put in place of the old one with what was mounted on it (masks,
    sockets): new lookups, so what changed on the real filesystem shows (see holder.project).
    A failure part way leaves the old mount on top: the caller retires the holder."""
    children = child_mounts(point)
    if children is None:
        raise RuntimeError(f"{point}: nothing is mounted there")
    with upper_of(builder, point) as upper, host_view(builder):
        new = overlay_fd(builder.masks.lower(point, builder.real_prefix + point), upper,
                         str(builder.work_dir(point)))
    try:
        attach(new, AT_FDCWD, point, MOVE_MOUNT_BENEATH)
        for child in children:
            move_child(child, new, os.path.relpath(child, point))
        detach(point)   # the old one, on top
    finally:
        os.close(new)


def _update(builder: Skeletons, real: str, copy: Path) -> str | None:
    """Bring one skeleton entry up to date; its kind, or None when it is gone."""
    try:
        real_dir = stat.S_ISDIR(os.lstat(real).st_mode)
    except FileNotFoundError:
        real_dir = None
    copy_dir = copy.is_dir() and not copy.is_symlink()
    if copy_dir and not real_dir:
        shutil.rmtree(copy)
    elif not copy_dir and real_dir is not False:   # gone, or a directory now
        copy.unlink(missing_ok=True)
    if real_dir is None:
        return None
    try:
        return builder.skeleton_entry(real, copy)
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def host_view(builder: Skeletons) -> Iterator[None]:
    """In the host's mount namespace for a moment, the holder's being the pivoted one without
    the host's mounts: overlayfs takes its layers, and open_tree its source, only from the
    caller's own namespace. The mounts made there are detached; they are attached back in
    the sandbox's. Calls never join the holder's namespace (they take the session's init's),
    so none can join the host's meanwhile; a holder that cannot go back ends at once."""
    if builder.host_ns < 0:   # not pivoted
        yield
        return
    _check(_libc.setns(builder.host_ns, CLONE_NEWNS), "setns to the host's mount namespace")
    try:
        yield
    finally:
        if _libc.setns(builder.own_ns, CLONE_NEWNS) != 0:
            os._exit(70)


@contextlib.contextmanager
def upper_of(builder: Skeletons, point: str) -> Iterator[str]:
    """``point``'s upper directory as its descriptor's path: overlay takes the directory
    make_upper's no-follow walk opened, never a path looked up again (a command may have
    made a symlink of it meanwhile: attack pass 17)."""
    fd = builder.make_upper(point)
    try:
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def _mount_entry(builder: Skeletons, level: str, name: str, kind: str, new: int) -> None:
    path = os.path.join(level, name)
    real = builder.real_prefix + path
    try:
        if kind == "dir":
            with upper_of(builder, path) as upper, host_view(builder):
                fd = overlay_fd(builder.masks.lower(path, real), upper, str(builder.work_dir(path)))
        else:
            readonly = os.path.isfile(real)
            with host_view(builder):
                fd = bind_fd(real, readonly)
        try:
            attach(fd, new, name)
        finally:
            os.close(fd)
    except OSError as exc:
        # Shown empty; writes there still land in the upper directory.
        builder.log.append(f"{path}: appeared after the sandbox started and cannot be shown ({exc})")


def bind_sockets(builder: Skeletons, paths: set[str], listening: Callable[[], frozenset[str]]) -> list[str]:
    """Bind the sockets daemons made after the sandbox started over their paths inside, as the
    build binds those there before (overlayfs cannot pass connect() through); the paths that
    could not be shown (a fresh holder shows them). The sandbox's own entry at a path wins;
    a socket nobody listens on is left as it is (connect() is refused there natively too)."""
    unbound, found = [], []
    with host_view(builder):
        live = listening()
        for path in sorted(paths):
            if os.path.lexists(builder.at(builder.upper, path)) or not _listened(path, live) \
                    or masklayer.under(builder.hidden, path):
                continue
            try:
                found.append((path, bind_fd(path, readonly=False)))
            except FileNotFoundError:
                continue   # removed since it was listed (daemons come and go): gone here too
            except OSError as exc:
                builder.log.append(f"{path}: a socket made after the sandbox started: {exc}")
                unbound.append(path)
    for path, fd in found:
        try:
            _attach_socket(fd, path)
        except OSError as exc:   # e.g. the sandbox looked it up before it existed
            if _unlinked(fd):
                continue   # removed outside since it was bound: the sandbox sees it gone too
            builder.log.append(f"{path}: a socket made after the sandbox started: {exc}")
            unbound.append(path)
        finally:
            os.close(fd)
    return unbound


def _unlinked(fd: int) -> bool:
    try:
        return os.fstat(fd).st_nlink == 0
    except OSError:
        return False


def _attach_socket(fd: int, path: str) -> None:
    try:
        attach(fd, AT_FDCWD, path)
    except FileNotFoundError:
        # A restarted daemon: the old socket is bound there, and a mount cannot go on top of
        # a removed file. Off with the old one (calls already running keep theirs), then on.
        if not is_socket(path):
            raise
        detach(path)
        attach(fd, AT_FDCWD, path)


def is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


def _listened(path: str, live: frozenset[str]) -> bool:
    return is_socket(path) and os.path.realpath(path) in live
