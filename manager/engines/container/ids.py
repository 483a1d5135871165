"""How a container's ids read on the host: its user namespace's maps, recorded as it starts.

Review compares an upper entry's owner, as a command inside saw it, with what native
work would leave (:func:`manager.changes.model._owner`); without the map it cannot, and
a chown inside (a change of owner alone) would be invisible, neither shown nor
committed. docker (no ``userns-remap``) and rootful podman map every id to itself;
rootless podman (``--userns keep-id``) maps the caller's ids to themselves and the rest
to subordinate ids; a daemon with ``userns-remap`` shifts them all. Rather than guess,
the maps are read from the container's init (``/proc/PID/uid_map`` read from the host's
namespace gives host ids) right after it starts, before any call can run in it.

Only in host mode with the init visible: in volume mode the host's upper is a tar copy
(its owners are the container's own ids as root unpacks them, the caller's otherwise)
and in a VM the pid means nothing here; owners are then not reviewed (``None``).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from manager.changes.meta import IdMap
from manager.fs.util import write_json_atomic

RECORD = "container.ids"   # {"uid": [[inside, on disk, count], ...], "gid": [...]}

Ranges = tuple[tuple[int, int, int], ...]


def record(sandbox: Path, pid: int) -> None:
    """Record the maps of the container whose init is ``pid`` (0 or unreadable: none)."""
    maps = _read(pid) if pid > 0 else None
    if maps is None:
        (sandbox / RECORD).unlink(missing_ok=True)
        return
    write_json_atomic(sandbox / RECORD, {"uid": maps[0], "gid": maps[1]}, indent=None)


def forget(sandbox: Path) -> None:
    (sandbox / RECORD).unlink(missing_ok=True)


def review_map(sandbox: Path) -> IdMap | None:
    """How review reads the session's upper owners (None: not at all)."""
    try:
        raw = json.loads((sandbox / RECORD).read_text())
        return IdMap(_ranges(raw["uid"]), _ranges(raw["gid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _read(pid: int) -> tuple[Ranges, Ranges] | None:
    with contextlib.suppress(OSError, ValueError):
        uid, gid = (_parse(Path(f"/proc/{pid}/{name}").read_text())
                    for name in ("uid_map", "gid_map"))
        if uid and gid:
            return uid, gid
    return None


def _parse(text: str) -> Ranges:
    return tuple((int(a), int(b), int(c)) for a, b, c in (line.split() for line in
                                                           text.splitlines() if line.strip()))


def _ranges(raw: object) -> Ranges:
    if not isinstance(raw, list):
        raise TypeError("not a list of ranges")
    return tuple((int(a), int(b), int(c)) for a, b, c in raw)
