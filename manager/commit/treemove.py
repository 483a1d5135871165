"""Commit a directory the sandbox created with one rename of the whole tree.

A new directory (nothing at its real path) whose every upper entry is planned as is
(none excluded, conflicting, refused or held) needs no per-entry work: on the upper's
own filesystem one ``rename`` publishes it, as binpash/try's ``try-commit`` does, and
is atomic (the real path is absent or the whole tree, never half of it). The tree
leaves the upper directory in the same step, so a resumed commit finds every step in
it done (its upper entry is gone). Data durability is the executor's: the upper
filesystem is synced before anything moves, the real one at the end.

Any entry that needs more than a rename makes the whole tree go the per-entry way:
one with other hard links, one another user owns (for an ordinary user), one carrying
unsupported overlay attributes, one not in the plan (a whiteout, an engine's mount
point), or a directory that cannot be read.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from manager.commit.journal import Step
from manager.commit.safefs import DIR_FLAGS
from manager.commit.safefs import lstat_at
from manager.commit.safefs import overlay_xattrs
from manager.commit.safefs import proc_path
from manager.commit.safefs import strip_overlay_xattrs
from manager.fs import longpath

TYPE_CHECKING = False
if TYPE_CHECKING:
    from manager.commit.steps import Executor

UNSUPPORTED_XATTRS = ("overlay.metacopy", "overlay.redirect")


@dataclass
class Moved:
    steps: list[Step]   # the directory's step and every step below it, all applied
    size: int           # bytes of regular files moved (progress counts them)


def tree_steps(steps: list[Step], index: int) -> list[Step]:
    """``steps[index]`` and the steps after it below its path (plans are in path order)."""
    top = steps[index]
    prefix = top.path + "/"
    end = index + 1
    while end < len(steps) and steps[end].path.startswith(prefix):
        end += 1
    return steps[index:end]


def move_tree(executor: Executor, steps: list[Step], index: int) -> Moved | None:
    """Rename the new directory of ``steps[index]`` into place with all below it; None when
    it is no such directory or anything in it needs the per-entry way."""
    top = steps[index]
    if top.action != "dir" or top.upper is None or top.keep_upper:
        return None
    group = tree_steps(steps, index)
    try:
        dir_fd, name = executor.real_at(top)
        if lstat_at(dir_fd, name) is not None:
            return None
        up_fd, up_name = executor.upper_at(top)
        ust = os.stat(up_name, dir_fd=up_fd, follow_symlinks=False)
        if not stat.S_ISDIR(ust.st_mode) or ust.st_dev != os.fstat(dir_fd).st_dev:
            return None
        if executor.check is not None and executor.check(executor, top, dir_fd, name) is not None:
            return None
        found = _inspect(up_fd, up_name, top, group)
        if found is None:
            return None
        size, marked = found
        for rel, attrs in marked:
            strip_overlay_xattrs(up_fd, f"{up_name}/{rel}" if rel else up_name, attrs)
        executor.note_filesystem(dir_fd)
        os.rename(up_name, name, src_dir_fd=up_fd, dst_dir_fd=dir_fd)
    except OSError:
        return None   # nothing moved: the per-entry way does it, or reports what is wrong
    return Moved(group, size)


def _inspect(up_fd: int, up_name: str, top: Step,
             group: list[Step]) -> tuple[int, list[tuple[str, list[str]]]] | None:
    """Bytes below the upper tree and its entries' overlay attributes (to strip), when
    the tree holds exactly the planned entries and each can simply move."""
    planned = {s.upper for s in group if s.layer == top.layer and not s.keep_upper
               and s.action in ("dir", "write")}
    if len(planned) != len(group):
        return None
    assert top.upper is not None
    root_st = os.stat(up_name, dir_fd=up_fd, follow_symlinks=False)
    marked: list[tuple[str, list[str]]] = []
    size = 0
    if not _movable(up_fd, up_name, root_st, "", marked):
        return None
    seen = 1
    todo = [""]
    while todo:
        rel = todo.pop()
        fd = longpath.open_path(proc_path(up_fd, f"{up_name}/{rel}" if rel else up_name),
                                DIR_FLAGS)
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    child = f"{rel}/{entry.name}" if rel else entry.name
                    st = entry.stat(follow_symlinks=False)
                    if f"{top.upper}/{child}" not in planned \
                            or not _movable(fd, entry.name, st, child, marked):
                        return None
                    seen += 1
                    if stat.S_ISDIR(st.st_mode):
                        todo.append(child)
                    elif stat.S_ISREG(st.st_mode):
                        size += st.st_size
        finally:
            os.close(fd)
    return (size, marked) if seen == len(planned) else None


def _movable(dir_fd: int, name: str, st: os.stat_result, rel: str,
             marked: list[tuple[str, list[str]]]) -> bool:
    if not stat.S_ISDIR(st.st_mode) and st.st_nlink != 1:
        return False   # its other names would go on sharing the real file's inode
    if os.geteuid() != 0 and st.st_uid != os.geteuid():
        return False   # only root keeps another owner: the per-entry way copies it
    attrs = overlay_xattrs(dir_fd, name)
    if any(a.endswith(UNSUPPORTED_XATTRS) for a in attrs):
        return False
    if attrs:
        marked.append((rel, attrs))
    return True
