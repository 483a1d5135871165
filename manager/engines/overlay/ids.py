"""Which ids the overlay engine's user namespace maps, and how they get written.

Three layouts, chosen per user (see docs/engines.md, "Identity"):

* ``full`` (root): every id to itself, 0-4294967294. Commands run as root, as outside,
  and ``chown 1000 f`` lands in the upper directory owned by 1000.
* ``subordinate`` (an ordinary user with /etc/subuid and /etc/subgid entries and a
  setuid ``newuidmap``/``newgidmap``): the user's own uid and gid map to themselves;
  every other inside id, from 0 upward, to the subordinate ranges in order (podman's
  ``keep-id``). Commands run as the user's own uid; only the holder is the namespace's
  root, which on disk is the first subordinate id.
* ``single`` (fallback, never a failure): only the namespace's root, mapped to the user
  (``unshare --map-root-user``). Commands run as uid 0 inside; ``doctor`` says why.

Stdlib only: the holder (run with ``-I``) does not import this; the launcher does.
"""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import stat
import subprocess
from pathlib import Path

from manager import fastjson
from manager.changes.meta import IdMap
from manager.engines.overlay.holder import names
from manager.record import Value

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.record
if TYPE_CHECKING:
    from typing import Final

IDMAP_FILE = names.IDMAP
FULL = "full"
SUBORDINATE = "subordinate"
SINGLE = "single"
ALL_IDS = 4294967295  # 0 .. 2^32-2: (uid_t)-1 is never an id
MAX_LINES = 340       # the kernel's limit on lines in uid_map

Range = tuple[int, int, int]   # (inside, outside, count), as /proc/PID/uid_map has it


class IdMaps(Value):
    __slots__ = ("mode", "uid", "gid", "as_uid", "why", "helpers")
    mode: Final[str]
    uid: Final[list[Range]]
    gid: Final[list[Range]]
    as_uid: Final[int | None]          # the uid commands switch to inside (None: stay as entered)
    why: Final[str]                    # for SINGLE: why not SUBORDINATE
    helpers: Final[dict[str, str]]     # newuidmap/newgidmap paths

    def __init__(self, mode: str, uid: list[Range], gid: list[Range], as_uid: int | None,
                 why: str = "", helpers: dict[str, str] | None = None) -> None:
        self.mode = mode
        self.uid = uid
        self.gid = gid
        self.as_uid = as_uid
        self.why = why
        self.helpers = helpers if helpers is not None else {}

    def as_json(self) -> dict[str, object]:
        return {"mode": self.mode, "uid": self.uid, "gid": self.gid, "as_uid": self.as_uid}


def plan() -> IdMaps:
    """The layout for this process's user."""
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        return IdMaps(FULL, [(0, 0, ALL_IDS)], [(0, 0, ALL_IDS)], None)
    helpers: dict[str, str] = {}
    for tool in ("newuidmap", "newgidmap"):
        path = shutil.which(tool)
        if path is None:
            return single(f"{tool} is not installed (package uidmap)")
        if not _privileged(path):
            return single(f"{path} is neither setuid root nor has file capabilities")
        helpers[tool] = path
    if not _unshare_sets_uid():
        return single("unshare cannot --setuid, which a call needs to drop to your uid "
                      "(util-linux >= 2.36)")
    names = _names(uid)
    sub_uids = subordinate(Path("/etc/subuid"), names)
    sub_gids = subordinate(Path("/etc/subgid"), names)   # keyed by user, as newgidmap reads it
    if not sub_uids or not sub_gids:
        missing = "/etc/subuid" if not sub_uids else "/etc/subgid"
        return single(f"this user has no subordinate ids in {missing}")
    return IdMaps(SUBORDINATE, keep_id(uid, sub_uids), keep_id(gid, sub_gids), uid,
                  helpers=helpers)


def single(why: str) -> IdMaps:
    """The fallback: only the namespace's root, mapped to this user."""
    return IdMaps(SINGLE, [(0, os.geteuid(), 1)], [(0, os.getegid(), 1)], None, why)


@functools.cache
def _unshare_sets_uid() -> bool:
    try:
        proc = subprocess.run(["unshare", "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--setuid" in proc.stdout


def _privileged(path: str) -> bool:
    st = os.stat(path)
    if st.st_uid == 0 and st.st_mode & stat.S_ISUID:
        return True
    try:
        os.getxattr(path, "security.capability")
        return True
    except OSError:
        return False


def _names(uid: int) -> set[str]:
    try:
        return {str(uid), pwd.getpwuid(uid).pw_name}
    except KeyError:
        return {str(uid)}


def subordinate(path: Path, names: set[str]) -> list[tuple[int, int]]:
    """(first, count) of each range ``path`` grants to any of ``names``, in file order."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    ranges = []
    for line in lines:
        parts = line.strip().split(":")
        if len(parts) == 3 and parts[0] in names and parts[1].isdigit() \
                and parts[2].isdigit() and int(parts[2]) > 0:
            ranges.append((int(parts[1]), int(parts[2])))
    return ranges


def keep_id(own: int, ranges: list[tuple[int, int]]) -> list[Range]:
    """Inside ids from 0 upward filled from ``ranges`` in order; ``own`` maps to itself."""
    lines: list[Range] = []
    inside = 0
    own_placed = False
    for first, count in ranges:
        if own_placed is False and first <= own < first + count:
            count_before = own - first   # the user's own id cannot be a subordinate one too
            ranges_left = [(first, count_before), (own + 1, first + count - own - 1)]
        else:
            ranges_left = [(first, count)]
        for start, n in ranges_left:
            while n > 0 and len(lines) < MAX_LINES - 1:
                if not own_placed and inside == own:
                    lines.append((own, own, 1))
                    own_placed, inside = True, inside + 1
                    continue
                take = n if own_placed or inside > own else min(n, own - inside)
                lines.append((inside, start, take))
                inside, start, n = inside + take, start + take, n - take
    if not own_placed:
        lines.append((own, own, 1))
    return lines


def apply(pid: int, maps: IdMaps) -> str | None:
    """Write ``maps`` for process ``pid``; None, or why it could not be done."""
    if maps.mode == SUBORDINATE:
        for tool, ranges in (("newuidmap", maps.uid), ("newgidmap", maps.gid)):
            argv = [maps.helpers.get(tool, tool), str(pid)]
            argv += [str(n) for line in ranges for n in line]
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return f"{tool}: {exc}"
            if proc.returncode != 0:
                return f"{tool}: {(proc.stderr or proc.stdout).strip() or f'exit {proc.returncode}'}"
        return None
    try:
        if maps.mode == SINGLE:
            _write(pid, "setgroups", "deny")   # the kernel's condition for an unprivileged gid_map
        _write(pid, "uid_map", _text(maps.uid))
        _write(pid, "gid_map", _text(maps.gid))
    except OSError as exc:
        return f"cannot write the id map of process {pid}: {exc.strerror}"
    return None


def _text(ranges: list[Range]) -> str:
    return "".join(f"{a} {b} {c}\n" for a, b, c in ranges)


def _write(pid: int, name: str, text: str) -> None:
    with open(f"/proc/{pid}/{name}", "w", encoding="ascii") as f:
        f.write(text)


def record(sandbox: Path, maps: IdMaps) -> None:
    tmp = sandbox / (IDMAP_FILE + ".tmp")
    tmp.write_text(fastjson.dumps(maps.as_json()))
    os.replace(tmp, sandbox / IDMAP_FILE)


def recorded(sandbox: Path) -> IdMaps | None:
    """The maps the sandbox's holder was started with (None: unknown, e.g. never started)."""
    try:
        raw = fastjson.loads((sandbox / IDMAP_FILE).read_text())
        return IdMaps(str(raw["mode"]), [tuple(r) for r in raw["uid"]],
                      [tuple(r) for r in raw["gid"]], raw["as_uid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def review_map(sandbox: Path) -> IdMap | None:
    """How review reads the upper directory's owners (None: not at all).

    The single mapping is left out: there the user's own files read as root's inside,
    and a command could not have given a file to anyone else.
    """
    maps = recorded(sandbox)
    if maps is None or maps.mode == SINGLE:
        return None
    return IdMap(tuple(maps.uid), tuple(maps.gid))
