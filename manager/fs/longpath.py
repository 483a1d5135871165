"""Paths of any length: a sandboxed command can make a directory chain whose paths are
longer than the kernel takes in one call (PATH_MAX, 4096 bytes: 3,000 one-letter
directories are 6,000). Such a path is reached in steps, each one opening a directory
relative to the last (openat), and the rest named below that directory's descriptor.

Short paths, nearly all, cost one length check.
"""

from __future__ import annotations

import contextlib
import os

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.record
if TYPE_CHECKING:
    from collections.abc import Iterator

# Well below PATH_MAX, so that "/proc/self/fd/N/" plus the rest still fits.
SHORT = 3072
_STEP = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC


def split(path: str) -> tuple[int | None, str]:
    """(a descriptor to close, or None; the rest of ``path`` relative to it): the rest is
    short enough for one call. Every directory on the way is looked up as the whole path
    would be (symlinks in it followed, as a path's inner components always are)."""
    if len(path) * 4 < SHORT:          # no character is more than 4 bytes
        return None, path
    raw = os.fsencode(path)
    if len(raw) < SHORT:
        return None, path
    fd: int | None = None
    pos = 0
    try:
        while len(raw) - pos >= SHORT:
            cut = raw.rfind(b"/", pos, pos + SHORT - 1)
            if cut < pos or (cut == pos and pos > 0):
                raise OSError(36, "a path component is too long", path)
            new = os.open(raw[pos:cut] or b"/", _STEP, dir_fd=fd)
            if fd is not None:
                os.close(fd)
            fd, pos = new, cut + 1
    except BaseException:
        if fd is not None:
            os.close(fd)
        raise
    return fd, os.fsdecode(raw[pos:])


@contextlib.contextmanager
def reach(path: str) -> Iterator[str]:
    """A name for ``path`` that any call takes (``/proc/self/fd/N/rest`` when it is long),
    valid inside the ``with``. A long path whose directories cannot be opened (missing,
    say) is given as it is: the call made with it fails as it would have."""
    try:
        fd, rest = split(path)
    except OSError:
        fd, rest = None, path
    if fd is None:
        yield path
        return
    try:
        yield f"/proc/self/fd/{fd}/{rest}"
    finally:
        os.close(fd)


def open_path(path: str, flags: int, mode: int = 0o777) -> int:
    """``os.open`` for a path of any length."""
    fd, rest = split(path)
    try:
        return os.open(rest, flags, mode, dir_fd=fd)
    finally:
        if fd is not None:
            os.close(fd)


def lstat(path: str) -> os.stat_result:
    fd, rest = split(path)
    try:
        return os.stat(rest, dir_fd=fd, follow_symlinks=False)
    finally:
        if fd is not None:
            os.close(fd)


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: str) -> None:
    """``rm -rf path`` at any depth (see remove_tree_at)."""
    parent, name = os.path.split(path.rstrip("/"))
    fd = open_path(parent or ".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        remove_tree_at(fd, name)
    finally:
        os.close(fd)


def remove_tree_at(parent_fd: int, name: str) -> None:
    """Remove directory ``name`` in ``parent_fd`` and all below it, never following a
    symlink, at any depth: a loop holding one directory open at a time (not recursion,
    nor one descriptor per level), climbing back through ".." only to the directory it
    came from (checked by device and inode: a directory moved meanwhile stops it).
    Directories the owner made unreadable or read-only are opened up first."""
    fd = _enter(parent_fd, name)
    # Per level below the top: (its name in its parent, its parent's (dev, ino), the
    # subdirectories still to remove in it).
    levels: list[tuple[str, tuple[int, int], list[str]]] = []
    try:
        subdirs = _clear_files(fd)
        while True:
            if subdirs:
                child = subdirs.pop()
                here = _ident(fd)
                sub = _enter(fd, child)
                os.close(fd)
                levels.append((child, here, subdirs))
                fd, subdirs = sub, _clear_files(sub)
                continue
            if not levels:
                break
            child, parent_id, subdirs = levels.pop()
            up = os.open("..", _DIR, dir_fd=fd)
            os.close(fd)
            fd = up
            if _ident(fd) != parent_id:
                raise OSError(16, "a directory was moved during its removal", child)
            remove_entry(fd, child, is_dir=True)
    finally:
        os.close(fd)
    remove_entry(parent_fd, name, is_dir=True)


def remove_entry(dir_fd: int, name: str, is_dir: bool = False) -> None:
    """One entry of a tree removed (one place: tests interrupt a removal here)."""
    if is_dir:
        os.rmdir(name, dir_fd=dir_fd)
    else:
        os.unlink(name, dir_fd=dir_fd)


def _ident(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _enter(parent_fd: int, name: str) -> int:
    try:
        fd = os.open(name, _DIR, dir_fd=parent_fd)
    except PermissionError:
        os.chmod(name, 0o700, dir_fd=parent_fd)   # unreadable (overlayfs work dirs: 0000)
        fd = os.open(name, _DIR, dir_fd=parent_fd)
    mode = os.fstat(fd).st_mode
    if mode & 0o700 != 0o700:                     # read-only: its entries could not go
        os.fchmod(fd, (mode & 0o7777) | 0o700)
    return fd


def _clear_files(fd: int) -> list[str]:
    """Remove every entry of ``fd`` that is not a directory; the directories' names."""
    import stat

    subdirs = []
    for child in os.listdir(fd):
        try:
            remove_entry(fd, child)
        except (IsADirectoryError, PermissionError):
            st = os.stat(child, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                raise
            subdirs.append(child)
    return subdirs
