"""The namespace holder of the built-in overlay engine.

Started as ``python3 -I .../engines/overlay SANDBOX IDLE_SECONDS PROJECT`` (``overlay/__main__.py``;
the modules: ``holder/__init__.py``). It makes its own user and mount namespaces, says
``userns`` and waits for the launcher to write their id maps (:mod:`manager.engines.overlay.ids`:
with ``newuidmap`` an ordinary user cannot write them itself) and answer ``go``;
then it becomes the namespace's
root, which only this machinery needs (calls run as the user's own uid). It mounts the whole
filesystem as overlays under ``SANDBOX/temproot`` (try's layout: writes land in
``SANDBOX/upperdir/<absolute path>``), pivots its root there (the host's detached: see
:func:`namespaces.pivot`) and then waits, so that each
call only has to enter its namespaces (a few milliseconds) instead of building
them (try: ~200 ms). It says ``ready`` or ``error: ...`` on stdout, once.

It exits when the session directory disappears or after IDLE_SECONDS without a
call while nothing else runs in its mount namespace.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import stat
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from . import egress_proxy
from . import gone
from . import hide
from . import mountinfo
from . import watch as watching
from .build import Builder
from .names import LAST_USED
from .names import SCAFFOLD
from .names import SKELETON
from .names import UPPER
from .names import WORK
from .namespaces import enter_namespaces
from .namespaces import pivot
from .project import ProjectView
from .session_init import init_gone
from .session_init import init_join
from .session_init import others_in_namespace
from .sync import Sync
from .sync import append_log
from .sync import record_scaffold
from .sync import retire

if TYPE_CHECKING:
    from .watch import LevelWatch
    from .watch import Watch

POLL_SECONDS = 30.0
STALE_POLL = 0.1       # while calls still run in a stale holder


def hand_back(sandbox: Path, uid: int, gid: int, skeleton: bool) -> None:
    """Give the machinery's own entries (scaffolding, work directories, whiteouts; with
    ``skeleton``, for the sandbox's removal, the skeleton too: it is the next holder's lower
    layer, root's inside) to the user on disk, so that the user's commit, discard and removal
    can change them. Entries a command made keep their owners: review shows them."""
    upper = sandbox / UPPER
    try:
        scaffold = json.loads((sandbox / SCAFFOLD).read_text())
    except (OSError, ValueError):
        scaffold = []
    mine = [upper, *(Path(str(upper) + p) for p in scaffold)]
    walk = watching.walk   # a loop: the sandbox's tree may be thousands deep
    for top in (sandbox / WORK, *([sandbox / SKELETON] if skeleton else [])):
        for dirpath, dirnames, filenames in walk(str(top)):
            mine.append(Path(dirpath))
            mine.extend(Path(dirpath, n) for n in (*dirnames, *filenames)
                        if not os.path.isdir(os.path.join(dirpath, n)))
    for path in mine:
        with contextlib.suppress(OSError):
            os.lchown(path, uid, gid)
    for dirpath, _, filenames in walk(str(upper)):   # whiteouts: overlayfs's own, as its mounter
        for name in filenames:
            entry = os.path.join(dirpath, name)
            with contextlib.suppress(OSError):
                st = os.lstat(entry)
                if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                    os.lchown(entry, uid, gid)


def wait(session_fd: int, idle_seconds: float, watch: Watch | None, sync: Sync, builder: Builder,
         host_upper: str) -> None:
    """Until the session is gone, idle, or stale (the real project changed); answering calls.
    ``host_upper``: the upper directory's path outside (for the record of holder/gone.py)."""
    poll = min(POLL_SECONDS, max(idle_seconds / 2, 0.5))
    stale = False
    while True:
        levels = [builder.watch.fd] if builder.watch is not None else []
        readable = [sync.requests, *levels, *([watch.fd] if watch and not stale else [])]
        ready, _, _ = select.select(readable, [], [], STALE_POLL if stale else poll)
        if sync.requests in ready and sync.serve(builder, session_fd):
            return
        if levels and levels[0] in ready:
            sync.collect(builder, session_fd)
        if watch is not None and watch.fd in ready:
            changed = watch.drain()
            if watch.gone:   # before any retiring: the evidence outlives this holder
                gone.note(builder.upper, host_upper, session_fd, watch.gone)
                watch.gone.clear()
            if changed and sync.view is not None and sync.view.point:
                sync.view.stale = True   # the next call's sync refreshes the project's mount
            else:
                stale = changed or stale
            sync.sockets |= watch.new_sockets
            watch.new_sockets.clear()
            sync.collect(builder, session_fd)   # marks the state dirty: the next call syncs
        stale = stale or sync.stale
        st = os.fstat(session_fd)
        if st.st_nlink == 0:
            return
        if init_gone():   # no call could enter the pid namespace: a fresh holder
            retire(session_fd, "the session's init ended")
            return
        if stale and not others_in_namespace():
            retire(session_fd, "a socket cannot be shown" if sync.stale else "the real project changed")
            return
        try:
            last = os.stat(LAST_USED, dir_fd=session_fd).st_mtime
        except FileNotFoundError:
            last = st.st_mtime
        if time.time() - last > idle_seconds and not others_in_namespace():
            return


def _level_watch(log: list[str]) -> LevelWatch | None:
    try:
        watch: LevelWatch = watching.LevelWatch()
    except OSError as exc:
        log.append(f"cannot watch for outside changes ({exc}); directories with mounts below them "
                   "are shown as they were when the sandbox started")
        return None
    return watch


def _watch(project: str, log: list[str]) -> Watch | None:
    if not project or not os.path.isdir(project):
        return None
    try:
        watch = watching.Watch(project)
        watch.add_tree()
    except OSError as exc:
        log.append(f"{project}: cannot watch for outside changes ({exc}); restart the session "
                   "(workspace discard or SessionEnd) to see them")
        return None
    if not watch.complete:
        log.append(f"{project}: watching the first {watch.count} directories for outside changes")
    return watch


def main(argv: list[str]) -> int:
    if argv[0] == "--hand-back":   # SANDBOX UID GID [skeleton], mapped as the holder's was
        try:
            enter_namespaces()
            hand_back(Path(argv[1]), int(argv[2]), int(argv[3]), argv[4:] == [SKELETON])
        except Exception as exc:  # noqa: BLE001 - reported to the launcher
            print(f"error: {exc}", flush=True)
            return 1
        print("ready", flush=True)
        return 0
    sandbox = Path(argv[0])
    idle_seconds = float(argv[1])
    project = argv[2] if len(argv) > 2 else ""
    log: list[str] = []
    builder = Builder(sandbox, _level_watch(log))
    builder.log = log
    try:
        network = egress_proxy.HolderNetwork(str(sandbox))   # network: before the namespaces
        enter_namespaces(pid_namespace=True, net_namespace=network.isolated, sandbox=sandbox)
        network.inside(builder.log)
        listed = hide.read_list(sandbox)
        builder.hide(frozenset(path for path, _ in listed))   # left out of the tree ...
        builder.build(project)
        hide.apply(builder.root, sandbox, listed, builder.log)   # ... and masked, read-only
        sync = Sync(sandbox)
    except Exception as exc:  # noqa: BLE001 - reported to the launcher, which raises
        print(f"error: {exc}", flush=True)
        return 1
    watch = _watch(project, builder.log)
    if watch is not None:
        watch.add_socket_dirs(builder.socket_dirs())
        sync.view = ProjectView(project, watch, sandbox)
    session_fd = os.open(sandbox, os.O_RDONLY | os.O_DIRECTORY)
    append_log(builder, session_fd, first=True)
    record_scaffold(sandbox, builder.scaffold)
    real_root = os.open("/", os.O_PATH | os.O_DIRECTORY)
    os.chmod(builder.root, os.stat("/").st_mode & 0o7777)
    try:
        builder.host_ns = pivot(builder.root)
        builder.own_ns = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        init_join()
    except (OSError, RuntimeError) as exc:
        print(f"error: {exc}", flush=True)
        return 1
    builder.rebase(Path(f"/proc/self/fd/{session_fd}"), f"/proc/self/fd/{real_root}")
    if sync.view is not None:
        sync.view.find_point(builder)
    try:
        network.serve(session_fd)   # network: the forwarder to the proxy, the calls' state
    except (OSError, RuntimeError) as exc:
        print(f"error: network: {exc}", flush=True)
        return 1
    try:   # the calls' namespaces, nested in this one (holder/views.py)
        sync.changes = mountinfo.Changes()
        sync.renew_view(session_fd)
    except (OSError, RuntimeError) as exc:
        print(f"error: {exc}", flush=True)
        return 1
    print("ready", flush=True)
    sys.stdout.close()
    os.close(1)
    wait(session_fd, idle_seconds, watch, sync, builder, str(sandbox / UPPER))
    return 0


