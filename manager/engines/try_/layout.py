"""try's DIR as the try engine lays it out: our files, the lean entry, what try makes.

Shared by the engine (:mod:`manager.engines.try_.engine`) and its doctor trial
(:mod:`manager.engines.try_.probe`), which both go through the same entry.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from manager.engines.overlay.holder import mountinfo

if TYPE_CHECKING:
    from manager.engines.try_.probe import TryInfo

ENTER_SCRIPT = Path(__file__).with_name("enter.sh")
OURS = "ws"                 # our files inside try's DIR
INFO_CACHE = "try.json"     # the detected try, until the script changes
LOCK = "lock"               # held by each call for its whole run


def make_layout(sandbox: Path) -> None:
    """try's DIR (idempotent); try would make the rest, but ``ws/tmp`` marks it prepared."""
    for sub in ("upperdir", "workdir", "temproot", f"{OURS}/tmp"):
        (sandbox / sub).mkdir(parents=True, exist_ok=True)
    for path, mode in shared_writable_dirs():
        upper = sandbox / "upperdir" / path.lstrip("/")
        if not upper.is_dir():
            upper.mkdir(parents=True, exist_ok=True)
            os.chmod(upper, mode)


def shared_writable_dirs() -> list[tuple[str, int]]:
    """Shared (sticky, world-writable) directories one level down that others own: /var/tmp.

    Unprivileged, try's overlay cannot copy such a directory up (its owner is not mapped
    in the user namespace), so creating a file there fails although the user may do it
    outside. Present in the upper layer beforehand, it needs no copy-up.
    """
    if os.geteuid() == 0:
        return []
    found = []
    for top in _top_level_dirs():
        if top in ("/proc", "/sys", "/dev") or os.path.islink(top):
            continue
        try:
            with os.scandir(top) as entries:
                for entry in entries:
                    if not entry.is_dir(follow_symlinks=False):
                        continue
                    st = entry.stat(follow_symlinks=False)
                    shared = st.st_mode & stat.S_IWOTH and st.st_mode & stat.S_ISVTX
                    if shared and st.st_uid != os.getuid():
                        found.append((entry.path, stat.S_IMODE(st.st_mode)))
        except OSError:
            continue
    return found


def entry_command(sandbox: Path, session_id: str, info: TryInfo, cwd: str,
                  cwd_out: Path | None, command: str) -> list[str]:
    return ["/bin/bash", str(ENTER_SCRIPT), str(sandbox), session_id, sys.executable,
            info.path, info.flag, cwd, str(cwd_out or ""), command]


def busy(sandbox: Path) -> bool:
    """Whether a call holds the sandbox's lock right now."""
    try:
        fd = os.open(sandbox / OURS / LOCK, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return True
        raise
    finally:
        os.close(fd)
    return False


def scaffold() -> frozenset[str]:
    """Directories try makes in the upper layer for its mounts (modes may differ: v0.2.0)."""
    found = set()
    shared = [path for path, _ in shared_writable_dirs()]
    for path in (*_top_level_dirs(), *_mount_points(), *shared):
        found.add(path)
        found.update(str(p) for p in Path(path).parents if str(p) != "/")
    return frozenset(found)


def _top_level_dirs() -> list[str]:
    # Symlinks too: v0.2.0 makes a directory for /bin -> usr/bin and mounts over it.
    with os.scandir("/") as entries:
        return [f"/{e.name}" for e in entries if e.is_dir()]


def _mount_points() -> list[str]:
    # try v0.2.0 also mounts every real mount point (findmnt --real).
    try:
        return [point for point in mountinfo.points(mountinfo.read()) if point != "/"]
    except OSError:
        return []

