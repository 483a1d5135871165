"""The holder's side of a call's request to see the latest state (see ``names.SYNC_REQUEST``),
and what the holder records in the session directory."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from . import levels
from . import mountinfo
from . import views
from .build import Builder
from .build import listening_sockets
from .names import HOLDER_PID
from .names import MOUNT_LOG
from .names import RETIRED
from .names import SCAFFOLD
from .names import SYNC_DIRTY
from .names import SYNC_DONE
from .names import SYNC_REQUEST
from .names import SYNC_SLEEP
from .session_init import namespace_members
from .session_init import new_view

if TYPE_CHECKING:
    from .project import ProjectView

SERVED_KEPT = 64


class Sync:
    """The holder's side of a call's request to see the latest state (see SYNC_REQUEST)."""

    def __init__(self, sandbox: Path) -> None:
        owner = os.stat(sandbox)
        for name in (SYNC_REQUEST, SYNC_SLEEP):
            (sandbox / name).unlink(missing_ok=True)
            os.mkfifo(sandbox / name, 0o600)
            # The calls open them as the user, whose uid is not this namespace's root
            # when subordinate ids are mapped (its root owns what it makes).
            os.chown(sandbox / name, owner.st_uid, owner.st_gid)
        # Read-write, so that it never sees end-of-file.
        self.requests = os.open(sandbox / SYNC_REQUEST, os.O_RDWR | os.O_NONBLOCK)
        (sandbox / SYNC_DONE).write_text("\n\n")
        os.chmod(sandbox / SYNC_DONE, 0o644)
        (sandbox / SYNC_DIRTY).touch()   # until the first answer: changes made while building
        self.pending: dict[str, set[str]] = {}
        # Several rounds' worth, so that a call that looks late still finds its nonce.
        self.served: collections.deque[str] = collections.deque(maxlen=SERVED_KEPT)
        self.broken = ""   # a swap that failed half-way: only a fresh holder is trustworthy
        self.sockets: set[str] = set()   # made by daemons outside since the last answer
        self.stale = False   # a socket could not be shown: a fresh holder once calls end
        self.view: ProjectView | None = None   # the project's mount, refreshed when it changed
        self.changes: mountinfo.Changes | None = None   # the mount table's: a new view for calls
        self.views = views.Slots()   # the views' descriptors, the current one published

    def nonces(self) -> list[str]:
        data = b""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self.requests, 65536):
                data += chunk
        return data.decode(errors="replace").split()

    def collect(self, builder: Builder, session_fd: int) -> None:
        """Drain the level watch; mark the state dirty (before sleeping again) if it changed."""
        if builder.watch is not None:
            for level, names in builder.watch.drain().items():
                self.pending.setdefault(level, set()).update(names)
        if self.pending or self.sockets or self.project_stale():
            os.close(os.open(SYNC_DIRTY, os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=session_fd))

    def serve(self, builder: Builder, session_fd: int) -> bool:
        """Answer the calls waiting; True when the holder has retired (they start a new one)."""
        nonces = self.nonces()
        if not nonces:
            return False
        self.collect(builder, session_fd)
        why = self.bring_up_to_date(builder, session_fd) if self.pending else ""
        if not why and self.project_stale():
            why = self.refresh_project(builder, session_fd)
        if not why and self.sockets:
            why = self.bind_sockets(builder, session_fd)
        if why != RETIRED and self.changes is not None and self.changes.since_last():
            try:
                self.renew_view(session_fd)
            except (OSError, RuntimeError) as exc:
                retire(session_fd, str(exc))
                why = RETIRED
        if not self.pending and not self.project_stale():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(SYNC_DIRTY, dir_fd=session_fd)
        self.answer(session_fd, nonces, why)
        return why == RETIRED

    def renew_view(self, session_fd: int) -> None:
        """The calls' view of the sandbox's mounts as they are now (holder/views.py)."""
        self.views.keep(session_fd, *new_view())

    def bring_up_to_date(self, builder: Builder, session_fd: int) -> str:
        # "/" is the holder's own root, which cannot be swapped under it: a fresh holder.
        failure = self.broken or ("" if "/" not in self.pending else "a new sandbox is needed to show it")
        refresh = levels.refresh
        builder.live = None   # listening sockets: as they are now
        for level in sorted(self.pending, key=lambda d: d.count("/")):
            if failure:
                break
            try:
                refresh(builder, level, self.pending[level])
            except (OSError, RuntimeError) as exc:
                failure = self.broken = f"{level}: {exc}"
            else:
                del self.pending[level]
        if builder.scaffold:
            record_scaffold(builder.sandbox, builder.scaffold)
        append_log(builder, session_fd)
        if not failure:
            return ""
        print(f"cannot bring {', '.join(sorted(self.pending))} up to date: {failure}", file=sys.stderr,
              flush=True)
        busy = namespace_members()
        if not busy:
            retire(session_fd, "a new sandbox is needed to show what changed outside")
            return RETIRED
        return (f"{', '.join(sorted(self.pending))} changed outside the sandbox and cannot be shown "
                f"while commands still run in it ({failure}): run the command again when they have "
                f"ended, or stop them (pids {', '.join(busy)})")

    def project_stale(self) -> bool:
        return self.view is not None and self.view.stale

    def refresh_project(self, builder: Builder, session_fd: int) -> str:
        """Show what changed in the real project (holder/project.py); RETIRED when only a
        fresh holder can. While commands run they keep the mount they have, and calls are
        shown the project as it was until they end (the state stays dirty)."""
        assert self.view is not None
        if namespace_members(first=True):
            return ""
        try:
            failure = self.view.refresh(builder)
        except (OSError, RuntimeError) as exc:
            failure = f"cannot show what changed in the real project: {exc}"
        append_log(builder, session_fd)
        if not failure:
            return ""
        retire(session_fd, failure)
        return RETIRED

    def bind_sockets(self, builder: Builder, session_fd: int) -> str:
        unbound = levels.bind_sockets(builder, self.sockets, listening_sockets)
        self.sockets.clear()
        append_log(builder, session_fd)
        if not unbound:
            return ""
        if namespace_members(first=True):
            self.stale = True   # shown by the holder that follows, when the running commands end
            return ""
        retire(session_fd, "; ".join(builder.log[-len(unbound):]))
        return RETIRED

    def answer(self, session_fd: int, nonces: list[str], why: str) -> None:
        tmp = SYNC_DONE + ".tmp"
        # 0644: the calls read it as the user, who is not this namespace's root when
        # subordinate ids are mapped (it holds nonces only).
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=session_fd)
        self.served.extend(nonces)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"{' '.join(self.served)}\n{why.replace(chr(10), ' ')}\n")
        os.replace(tmp, SYNC_DONE, src_dir_fd=session_fd, dst_dir_fd=session_fd)


def retire(session_fd: int, why: str) -> None:
    """Stop new calls from entering (they start a fresh holder) before exiting."""
    print(f"retired: {why}", file=sys.stderr, flush=True)
    try:
        with open(HOLDER_PID, encoding="ascii", opener=lambda p, f: os.open(p, f, dir_fd=session_fd)) as f:
            mine = f.read().split()[:1] == [str(os.getpid())]
        if mine:
            os.unlink(HOLDER_PID, dir_fd=session_fd)
    except (OSError, ValueError):
        pass


def append_log(builder: Builder, session_fd: int, first: bool = False) -> None:
    """What the build (``first``: a new mount.log) or a refresh since logged, in mount.log.
    Through the session directory's descriptor: after the pivot it has no path here."""
    lines = builder.log[builder.logged:]
    if not (lines or first):
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_TRUNC if first else os.O_APPEND)
    try:
        fd = os.open(MOUNT_LOG, flags, 0o644, dir_fd=session_fd)
    except OSError as exc:
        print(f"cannot write mount.log: {exc}", file=sys.stderr, flush=True)
        return
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as out:
        out.write("".join(line + "\n" for line in lines))
    builder.logged = len(builder.log)


def record_scaffold(sandbox: Path, created: list[str]) -> None:
    path = sandbox / SCAFFOLD
    try:
        known = set(json.loads(path.read_text()))
    except (OSError, ValueError):
        known = set()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(sorted(known | set(created))))
    os.replace(tmp, path)


