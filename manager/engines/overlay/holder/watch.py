"""Notice when the real project changes under a running overlay (stdlib only).

overlayfs caches lookups: once a sandboxed call has looked a path up, a file
that appears on the real filesystem later (a new file, an editor's atomic
save, a deletion) keeps its old answer in that mount. So the holder watches the
real project tree with inotify; the next call's sync mounts a fresh overlay
over the project's (holder/project.py), or, where that cannot be done, the holder
retires as soon as nothing runs in it and the next call starts a fresh one.
Writes made inside the sandbox go to the upper directory and never show up
here. In-place writes need no watch: the overlay reads the same inode.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
import struct
from collections.abc import Iterator

IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_ONLYDIR = 0x01000000
IN_MASK_ADD = 0x20000000
IN_ISDIR = 0x40000000
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000   # the watch is gone (its directory removed)
NAMESPACE_CHANGES = (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO
                     | IN_DELETE_SELF | IN_MOVE_SELF)
EVENT = struct.Struct("iIII")
MAX_DIRECTORIES = 20000
# Not watched: git rewrites its index and refs on every `git status` (passthrough
# commands run on the real repository), and a holder restart each time would cost
# more than the sandbox's rare reads of .git are worth.
SKIP = {".git"}


class Watch:
    """inotify over a directory tree, capped; ``changed()`` after a read says if it moved."""

    def __init__(self, root: str, limit: int = MAX_DIRECTORIES) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.root = root
        self.limit = limit
        self.count = 0
        self.complete = True
        self.tree: dict[int, str] = {}            # watch descriptors of the tree -> their paths
        self.new_dirs: set[str] = set()           # made or moved in since the last look
        self.lost = False                         # the queue overflowed: changes unknown
        self.socket_dirs: dict[int, tuple[str, int]] = {}   # ... of socket directories -> (path, fd)
        self.new_sockets: set[str] = set()        # made in them since the last look
        self.gone: list[tuple[str, bool]] = []    # (path, was a directory) deleted or moved away

    def add_tree(self, top: str = "", prefix: str = "") -> None:
        """Watch ``top`` (the root) and the directories below it; ``prefix``: where the real
        filesystem is from here (the holder, once pivoted)."""
        top = top or self.root
        for dirpath, dirnames, _ in walk(prefix + top):
            if not self._add(dirpath[len(prefix):], prefix):
                dirnames[:] = []
                continue
            dirnames[:] = [d for d in dirnames if d not in SKIP]

    def follow_new_directories(self, prefix: str) -> None:
        """Watch the directories made since the last look, the sandbox having been shown them."""
        for path in sorted(self.new_dirs, key=len):
            if os.path.basename(path) not in SKIP:
                self.add_tree(path, prefix)
        self.new_dirs.clear()

    def _add(self, path: str, prefix: str = "") -> bool:
        if self.count >= self.limit:
            self.complete = False
            return False
        wd = self.libc.inotify_add_watch(self.fd, os.fsencode(prefix + path),
                                         NAMESPACE_CHANGES | IN_ONLYDIR)
        if wd < 0:  # e.g. ENOSPC: fs.inotify.max_user_watches reached
            self.complete = False
            return False
        if wd not in self.tree:
            self.count += 1
        self.tree[wd] = path   # a directory moved within the tree: its new path
        return True

    def add_socket_dirs(self, paths: list[str]) -> None:
        """Also watch these directories (one level) for a socket made or replaced in them.

        The holder binds the sockets daemons listen on (overlayfs cannot pass connect()
        through); a daemon that starts or restarts later makes a new socket, which the
        holder binds too (``new_sockets``). Other changes there do not count.
        """
        for path in paths:
            wd = self.libc.inotify_add_watch(self.fd, os.fsencode(path),
                                             IN_CREATE | IN_MOVED_TO | IN_ONLYDIR | IN_MASK_ADD)
            if wd >= 0 and wd not in self.tree:   # in the tree, every change counts already
                # Held open: the holder looks from inside its pivoted root, where the overlay may
                # remember that the name did not exist.
                with contextlib.suppress(OSError):
                    self.socket_dirs[wd] = (path, os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))

    def drain(self) -> bool:
        """Read pending events; True when names in the tree changed. Sockets made in the
        socket directories are collected in ``new_sockets``."""
        changed = False
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return changed
            changed = any([changed, *(self._counts(*event) for event in _events(data))])

    def _counts(self, wd: int, mask: int, name: bytes) -> bool:
        if mask & IN_Q_OVERFLOW:
            self.lost = True
            return True
        directory = self.socket_dirs.get(wd)
        if directory is None:
            parent = self.tree.get(wd)
            if parent is not None and mask & IN_ISDIR and mask & (IN_CREATE | IN_MOVED_TO):
                self.new_dirs.add(os.path.join(parent, os.fsdecode(name)))
            if parent is not None and mask & (IN_DELETE | IN_MOVED_FROM):
                self.gone.append((os.path.join(parent, os.fsdecode(name)), bool(mask & IN_ISDIR)))
            if mask & IN_IGNORED and self.tree.pop(wd, None) is not None:
                self.count -= 1
            return bool(mask & NAMESPACE_CHANGES)
        # A new socket is no reason for a new holder: it is bound at the next call's sync.
        path, fd = directory
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                self.new_sockets.add(os.path.join(path, os.fsdecode(name)))
        return False


def _events(data: bytes) -> list[tuple[int, int, bytes]]:
    """(watch descriptor, mask, name) of each event."""
    events, offset = [], 0
    while offset + EVENT.size <= len(data):
        wd, mask, _cookie, length = EVENT.unpack_from(data, offset)
        name = data[offset + EVENT.size:offset + EVENT.size + length].rstrip(b"\0")
        events.append((wd, mask, name))
        offset += EVENT.size + length
    return events


IN_MODIFY = 0x02
IN_ATTRIB = 0x04
IN_CLOSE_WRITE = 0x08
# A snapshotted directory's entries are copies: content and attribute changes count too.
LEVEL_CHANGES = NAMESPACE_CHANGES | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE
NAME_CHANGES = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO
EVERYTHING = ""   # a name standing for "rescan the whole directory"


class LevelWatch:
    """inotify over the directories the holder snapshots (one watch each, not recursive).

    Never waited on: the holder drains it when a call asks to be brought up to date.
    Events are queued during the writer's own system call, so a drain sees every change
    completed before it. ``drain()`` gives {directory: {changed names}}; a directory
    changed beyond what the queue held maps to {EVERYTHING}.
    """

    def __init__(self) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.dirs: dict[int, str] = {}

    def add(self, directory: str) -> None:
        wd = self.libc.inotify_add_watch(self.fd, os.fsencode(directory), LEVEL_CHANGES | IN_ONLYDIR)
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {directory}")
        self.dirs[wd] = directory

    def drain(self) -> dict[str, set[str]]:
        changed: dict[str, set[str]] = {}
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return changed
            for wd, mask, name in _events(data):
                if mask & IN_Q_OVERFLOW:
                    return {d: {EVERYTHING} for d in self.dirs.values()}
                directory = self.dirs.get(wd)
                if directory is None or mask & (IN_DELETE_SELF | IN_MOVE_SELF):
                    continue   # a directory gone from the real filesystem: its parent says so
                if mask & IN_ISDIR and not mask & NAME_CHANGES:
                    continue   # a subdirectory's own attributes: its overlay shows them live
                changed.setdefault(directory, set()).add(os.fsdecode(name))


def walk(top: str) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk(top)`` (top-down; prune by editing the directory names) as a loop: Python
    3.11's recurses, and a tree thousands deep (an agent's, committed) raised RecursionError
    in the holder. Symlinks are not followed; an unreadable directory is skipped."""
    todo = [top]
    while todo:
        path = todo.pop()
        try:
            with os.scandir(path) as found:
                entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in found]
        except OSError:
            continue
        dirnames = [name for name, is_dir in entries if is_dir]
        yield path, dirnames, [name for name, is_dir in entries if not is_dir]
        todo.extend(os.path.join(path, name) for name in reversed(dirnames))
