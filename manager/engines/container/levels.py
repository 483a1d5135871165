"""Rootless podman: $HOME overlaid entry by entry around what the kernel cannot overlay.

Rootless podman mounts its overlays in a user namespace, where the kernel refuses (EINVAL)
a lower directory with mounts below it; podman's own storage
(``~/.local/share/containers/storage``), where each container's files are mounted as it
starts, is below ``$HOME``. So ``$HOME`` is overlaid one level at a time, as the overlay
engine does ("skeleton", docs/architecture.md):

- A directory with nothing mounted below it and no storage in it is overlaid whole
  (lower: the real directory).
- Any other one is a *level*: its overlay's lower is a *skeleton* the session makes
  (``sandbox/skeleton/<absolute path>``) of its entries one level deep -- copies of its
  regular files up to ``COPY_LIMIT``, its symlinks, empty directories as mount points --
  and each directory entry gets its own overlay on top, by the same rule (so ``~/.local``
  is a level, ``~/.local/bin`` is overlaid whole, ``~/.local/share`` is a level again).
- Not shown at all: podman's storage (the ``containers`` directory holding its graph root,
  else the root itself), entries whose names the mount syntax cannot carry, sockets,
  fifos and devices, files that cannot be read. Larger regular files are bound read-only
  (readable; writing them fails).

Every overlay's upper is ``sandbox/upperdir/<its absolute path>``: the entries' uppers sit
inside the level's, exactly where an overlay upper of the whole ``$HOME`` would hold
those changes, so review and commit read the one ``Layer(upperdir/<$HOME>, $HOME)`` as
before (the entries are not layers of their own, so nothing is read twice), compared
with the real ``$HOME``. The skeleton is remade when a container starts; a skeleton copy
is a snapshot, so a change the sandbox makes to a level's file is dated, for the commit's
conflict check, no later than the snapshot it was made from (``remember_births``): a real
file changed after the snapshot is a conflict, never silently overwritten.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from manager.engines.container.upper import UNSAFE_PATH_CHARS
from manager.fs.util import write_json_atomic

SKELETON = "skeleton"       # skeleton/<absolute path>: the levels' lower dirs
RECORD = "levels.json"      # {"levels": [...], "times": [ns, ...]}: every level, every snapshot
COPY_LIMIT = 1 << 20        # larger regular files are bound read-only, not copied
# Skeleton times are taken this much early: file times come from the kernel's coarse clock.
CLOCK_MARGIN_NS = 50_000_000


@dataclass
class Plan:
    """How one directory is shown: overlaid whole, or as levels with entries on top."""

    whole: list[str] = field(default_factory=list)      # overlaid with the real dir as lower
    levels: list[str] = field(default_factory=list)     # overlaid over their skeleton
    readonly: list[str] = field(default_factory=list)   # large files bound read-only
    hidden: list[tuple[str, str]] = field(default_factory=list)   # (path, why) not shown
    covered: list[str] = field(default_factory=list)    # mounted by another (the project)

    def mounts(self) -> list[tuple[str, bool]]:
        """(target, is a level), parents before what is mounted on them."""
        found = [(p, True) for p in self.levels] + [(p, False) for p in self.whole]
        return sorted(found, key=lambda item: (item[0].count("/"), item[0]))


def hidden_roots(storage: tuple[str, ...]) -> tuple[str, ...]:
    """What of podman's storage is never shown: the ``containers`` directory holding a
    graph root (podman's data directory: ``~/.local/share/containers``), else the root."""
    found = []
    for root in storage:
        parent = os.path.dirname(root)
        found.append(parent if os.path.basename(parent) == "containers" else root)
    return tuple(dict.fromkeys(found))


def plan(path: str, points: set[str], hidden: tuple[str, ...], project: str = "") -> Plan:
    """How ``path`` is shown given the mount points seen from the user namespace
    (``project``, an entry of a level, is only a mount point there: its own overlay covers
    it, and podman refuses two mounts at one path)."""
    result = Plan()
    _descend(path, points, hidden, result, project)
    return result


def _descend(path: str, points: set[str], hidden: tuple[str, ...], result: Plan,
             project: str) -> None:
    prefix = path.rstrip("/") + "/"
    if not any(p.startswith(prefix) for p in points) \
            and not any(h.startswith(prefix) for h in hidden):
        result.whole.append(path)
        return
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError as exc:
        result.hidden.append((path, f"cannot be listed ({exc.strerror})"))
        return
    result.levels.append(path)
    for entry in entries:
        full = entry.path
        if full in hidden:
            result.hidden.append((full, "podman's storage: its containers' files are mounted "
                                        "there"))
        elif UNSAFE_PATH_CHARS & set(entry.name):
            result.hidden.append((full, "its name has a character the mount syntax cannot "
                                        "carry"))
        elif full == project:
            result.covered.append(full)
        elif entry.is_dir(follow_symlinks=False):
            _descend(full, points, hidden, result, project)
        elif entry.is_file(follow_symlinks=False) and _large(entry):
            result.readonly.append(full)
        elif not (entry.is_file(follow_symlinks=False) or entry.is_symlink()):
            result.hidden.append((full, "not a file, directory or symlink"))


def _large(entry: os.DirEntry[str]) -> bool:
    with contextlib.suppress(OSError):
        return entry.stat(follow_symlinks=False).st_size > COPY_LIMIT
    return False


def skeleton_dir(sandbox: Path, path: str) -> Path:
    return sandbox / SKELETON / path.lstrip("/")


def build(sandbox: Path, shown: Plan) -> None:
    """Make the levels' skeletons afresh (no container runs on them now) and record them."""
    stamp = time.time_ns() - CLOCK_MARGIN_NS
    root = sandbox / SKELETON
    if root.exists():
        _make_removable(root)
        shutil.rmtree(root)
    for level in shown.levels:
        _fill(sandbox, level, shown)
    # Last (a read-only one could not be filled): podman gives an overlay's upper root its
    # lower's mode, so a skeleton must have its directory's, or review sees a mode change.
    for level in shown.levels:
        with contextlib.suppress(OSError):
            os.chmod(skeleton_dir(sandbox, level), os.stat(level).st_mode & 0o7777)
    if shown.levels:
        _record(sandbox, shown.levels, stamp)


def _fill(sandbox: Path, level: str, shown: Plan) -> None:
    skeleton = skeleton_dir(sandbox, level)
    skeleton.mkdir(parents=True, exist_ok=True)
    skipped = {p for p, _ in shown.hidden}
    for entry in sorted(os.scandir(level), key=lambda e: e.name):
        copy = skeleton / entry.name
        if entry.path in skipped:
            continue
        try:
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), copy)
            elif entry.is_dir(follow_symlinks=False):
                copy.mkdir(exist_ok=True)    # a mount point: the entry's overlay covers it
            elif entry.path in shown.readonly:
                copy.touch()                 # a mount point for the read-only bind
            elif entry.is_file(follow_symlinks=False):
                shutil.copy2(entry.path, copy, follow_symlinks=False)
        except OSError as exc:   # unreadable, or gone meanwhile: not shown
            shown.hidden.append((entry.path, f"cannot be copied ({exc.strerror})"))
            with contextlib.suppress(OSError):
                copy.unlink()


def _make_removable(root: Path) -> None:
    for dirpath, dirnames, _ in os.walk(root):
        for name in dirnames:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(dirpath, name), 0o700)


def _record(sandbox: Path, levels: list[str], stamp: int) -> None:
    old = recorded(sandbox)
    data = {"levels": list(dict.fromkeys([*old[0], *levels])), "times": [*old[1], stamp]}
    write_json_atomic(sandbox / RECORD, data, indent=None, sort_keys=False)


def recorded(sandbox: Path) -> tuple[list[str], list[int]]:
    """(every directory ever shown as a level, every skeleton's time) of this session."""
    try:
        data = json.loads((sandbox / RECORD).read_text())
        levels = [p for p in data["levels"] if isinstance(p, str)]
        times = sorted(t for t in data["times"] if isinstance(t, int))
    except (OSError, ValueError, KeyError, TypeError):
        return [], []
    return levels, times


def remember_births(sandbox: Path, uppers: str) -> None:
    """Date each change to a level's own entries no later than the skeleton it came from.

    An entry the overlay copied up from a skeleton copy was based on the real file as it
    was when the skeleton was made, not when it was copied up: a real change in between
    must still be a conflict at commit.
    """
    levels, times = recorded(sandbox)
    if not times:
        return
    from manager.commit import btime

    births: dict[str, int] = {}
    for level in levels:
        upper = sandbox / uppers / level.lstrip("/")
        with contextlib.suppress(OSError):
            for entry in os.scandir(upper):
                if entry.is_dir(follow_symlinks=False):
                    continue   # an entry's own overlay (its files are dated by their own births)
                born = btime.birth_ns(btime.AT_FDCWD, entry.path)
                base = max((t for t in times if t <= born), default=times[0])
                births[entry.path] = min(born, base)
    btime.remember(births)


def hidden_note(path: str, why: str) -> str:
    return f"workspace: {path} is not shown in this container: {why}"
