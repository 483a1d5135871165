"""Filesystem operations through directory file descriptors, never through symlinks.

Commit and discard write into trees that a sandboxed program shaped: any path
component may have become a symlink pointing elsewhere. Every directory is
therefore opened one component at a time with ``O_NOFOLLOW | O_DIRECTORY`` and
every operation names an entry relative to its parent's descriptor.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from manager.changes.meta import OVERLAY_XATTR_PREFIXES
from manager.changes.meta import content_xattrs
from manager.fs import longpath
from manager.fs.longpath import remove_tree_at

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC



class UnsafePath(OSError):
    """A path component is a symlink (or not a directory) where a directory is needed."""


class DirChain:
    """Directory descriptors below one root, opened without following symlinks.

    Callers visit paths in sorted order, so the directories form a stack (the
    ancestors of the current path). A tree may be thousands of levels deep (more than
    a process may hold descriptors): the last ``NEAR`` levels and every ``EVERY``th
    keep theirs; a level whose descriptor was closed is opened again from the nearest
    one above it, one component at a time, when the walk comes back to it.
    """

    NEAR = 16
    EVERY = 32

    def __init__(self, root: Path) -> None:
        self.root = root
        self._stack: list[tuple[tuple[str, ...], int | None]] = []

    def __enter__(self) -> DirChain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.forget(())

    def fd(self, parts: tuple[str, ...]) -> int:
        """A descriptor for ``root/parts``; raises :class:`UnsafePath` at a symlink."""
        stack = self._stack
        while stack and stack[-1][0] != parts[: len(stack[-1][0])]:
            self._pop()
        if not stack:
            root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            stack.append(((), root_fd))
        while stack[-1][1] is None:       # closed to save descriptors: opened below again
            self._pop()
        while len(stack[-1][0]) < len(parts):
            done, parent = stack[-1]
            assert parent is not None
            name = parts[len(done)]
            try:
                fd = os.open(name, DIR_FLAGS, dir_fd=parent)
            except OSError:
                fd = open_dir_at(parent, name, self.root / Path(*done))  # raises, says where
            stack.append((done + (name,), fd))
            far = len(stack) - 1 - self.NEAR
            if far > 0 and far % self.EVERY and stack[far][1] is not None:
                os.close(stack[far][1])  # type: ignore[arg-type]
                stack[far] = (stack[far][0], None)
        fd_top = stack[-1][1]
        assert fd_top is not None
        return fd_top

    def _pop(self) -> None:
        fd = self._stack.pop()[1]
        if fd is not None:
            os.close(fd)

    def forget(self, parts: tuple[str, ...]) -> None:
        """Close descriptors at or below ``parts`` (it was replaced or removed)."""
        while self._stack and self._stack[-1][0][: len(parts)] == parts:
            self._pop()


def rel_parts(root: Path | str, path: str) -> tuple[str, ...]:
    """``path`` relative to ``root`` as components (string work: pathlib is slow here)."""
    prefix = str(root).rstrip("/") + "/"
    if not path.startswith(prefix):
        raise ValueError(f"{path} is not below {root}")
    return tuple(path[len(prefix):].split("/"))


def open_dir_at(parent_fd: int, name: str, where: Path) -> int:
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePath(exc.errno, f"{where / name} is not a directory (a symlink is never "
                                        "followed)") from None
        raise


def lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def proc_path(dir_fd: int, name: str) -> str:
    """A path naming ``name`` in ``dir_fd`` for calls that lack a ``dir_fd`` argument."""
    return f"/proc/self/fd/{dir_fd}/{name}"


def remove_at(dir_fd: int, name: str) -> None:
    """Remove a file, symlink or whole directory tree, never following symlinks."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except IsADirectoryError:
        remove_tree_at(dir_fd, name)
    except PermissionError:
        st = lstat_at(dir_fd, name)
        if st is None or not stat.S_ISDIR(st.st_mode):
            raise
        remove_tree_at(dir_fd, name)


def walk_stats(dir_fd: int, name: str) -> Iterator[os.stat_result]:
    """The lstat of ``name`` and, for a directory, of everything below it."""
    return (st for _, st in walk_entries(dir_fd, name))


def walk_entries(dir_fd: int, name: str) -> Iterator[tuple[str, os.stat_result]]:
    """(path relative to ``name``, lstat) of ``name`` ("") and, for a directory, of
    everything below it (a loop over "/proc/self/fd" names of open directories: any depth,
    one descriptor per level only while its entries are read)."""
    st = lstat_at(dir_fd, name)
    if st is None:
        return
    yield "", st
    if not stat.S_ISDIR(st.st_mode):
        return
    top = proc_path(dir_fd, name)
    todo = [""]
    while todo:
        rel = todo.pop()
        fd = longpath.open_path(f"{top}/{rel}" if rel else top, DIR_FLAGS)
        try:
            for child in os.listdir(fd):
                found = lstat_at(fd, child)
                if found is None:
                    continue
                below = f"{rel}/{child}" if rel else child
                yield below, found
                if stat.S_ISDIR(found.st_mode):
                    todo.append(below)
        finally:
            os.close(fd)


def overlay_xattrs(dir_fd: int, name: str) -> list[str]:
    try:
        names = os.listxattr(proc_path(dir_fd, name), follow_symlinks=False)
    except OSError:
        return []
    return [n for n in names if n.startswith(OVERLAY_XATTR_PREFIXES)]


def sync_xattrs(src: str, dst: int) -> None:
    """Make the content xattrs of directory ``dst`` (a descriptor) those of ``src``."""
    want = content_xattrs(src)
    have = content_xattrs(dst)
    for name in have.keys() - want.keys():
        os.removexattr(dst, name)
    for name, value in want.items():
        if have.get(name) != value:
            try:
                os.setxattr(dst, name, value)
            except OSError as exc:
                raise OSError(exc.errno, f"cannot set extended attribute {name} "
                                         f"({exc.strerror})") from None


def copy_xattrs(src: str | int, dst: str | int) -> None:
    """Give ``dst`` the content xattrs of ``src`` (paths not followed, or descriptors);
    raises when one cannot be set, so none is dropped silently."""
    for name, value in content_xattrs(src).items():
        try:
            os.setxattr(dst, name, value, follow_symlinks=isinstance(dst, int))
        except OSError as exc:
            raise OSError(exc.errno, f"cannot set extended attribute {name} "
                                     f"({exc.strerror})") from None


_libc: ctypes.CDLL | None = None


def syncfs(fd: int) -> None:
    """Flush the filesystem holding ``fd`` (``os.sync()`` where syncfs is missing)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    func = getattr(_libc, "syncfs", None)
    if func is None or func(fd) != 0:
        os.sync()
