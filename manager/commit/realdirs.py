"""Our own commits change real directories: remember it, so it is not taken for someone else's.

The conflict check (:mod:`manager.commit.plan`) treats a real directory whose names
changed after the sandbox's view was taken as one where a real file may have been
deleted. A commit of some paths changes their directories' names too, and the paths
still pending there would then all be conflicts. So each commit records, for every
real directory it changes, the directory's ctime after the commit and the ctime of the
last change made by anyone else (carried over from an earlier record when the commit
found the directory as an earlier commit left it). The record is kept only when no name
but those the commit wrote or removed changed in the directory meanwhile: a name changed
by someone else drops the record
(a conflict may be reported that was none, never the reverse).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

from manager.commit.journal import Step

COARSE_CLOCK = 5               # CLOCK_REALTIME_COARSE (Linux), which stamps files; unnamed in time
RECORD = "real-dirs.json"     # in the session directory: {dir: [outside ctime, ctime after]}
PENDING = "real-dirs.pending.json"   # a commit under way: the directories' state before it
Record = dict[str, tuple[int, int]]


def load(session_dir: Path) -> Record:
    try:
        data = json.loads((session_dir / RECORD).read_text())
        return {str(k): (int(v[0]), int(v[1])) for k, v in data.items()}
    except (OSError, ValueError, TypeError, IndexError, AttributeError):
        return {}


def outside_ctime(record: Record, directory: str, ctime: int) -> int:
    """The last change to ``directory`` not made by our own commits (its ``ctime`` now)."""
    found = record.get(directory)
    return found[0] if found is not None and found[1] == ctime else ctime


class Watch:
    """The real directories a commit's steps change: their state before, then after."""

    def __init__(self, session_dir: Path, steps: Sequence[Step]) -> None:
        self.session_dir = session_dir
        self.record = load(session_dir)
        self.made: dict[str, set[str]] = {}
        self.gone: dict[str, set[str]] = {}
        for step in steps:
            parent, name = os.path.split(step.path)
            (self.gone if step.action == "remove" else self.made).setdefault(parent, set()).add(name)
        self.before = {d: self._state(d) for d in {*self.made, *self.gone}}
        # Kept until finish: a commit killed half-way is finished by the next one, whose
        # own "before" would take this commit's changes for someone else's.
        _write(session_dir / PENDING, {d: [b[0], sorted(b[1]), sorted(self.made.get(d, ())),
                                           sorted(self.gone.get(d, ()))]
                                       for d, b in self.before.items() if b is not None})

    @classmethod
    def resume(cls, session_dir: Path) -> None:
        """Finish the record of a commit that was killed (after its journal was replayed)."""
        try:
            data = json.loads((session_dir / PENDING).read_text())
        except (OSError, ValueError):
            return
        watch = cls.__new__(cls)
        watch.session_dir, watch.record = session_dir, load(session_dir)
        watch.before, watch.made, watch.gone = {}, {}, {}
        with contextlib.suppress(TypeError, ValueError, IndexError, AttributeError):
            for d, (origin, names, made, gone) in data.items():
                watch.before[d] = (int(origin), set(names))
                watch.made[d], watch.gone[d] = set(made), set(gone)
        watch.finish()

    def _state(self, directory: str) -> tuple[int, set[str]] | None:
        try:
            ctime, names = _names(directory)
        except FileNotFoundError:
            return 0, set()          # made by this commit: nobody else changed it before
        except OSError:
            return None
        return outside_ctime(self.record, directory, ctime), names

    def finish(self) -> None:
        latest = 0
        for directory, before in self.before.items():
            self.record.pop(directory, None)
            if before is None:
                continue
            origin, names = before
            ours = self.made.get(directory, set()) | self.gone.get(directory, set())
            with contextlib.suppress(OSError):
                ctime, now = _names(directory)
                if not (now ^ names) - ours:     # only the commit's own names changed
                    self.record[directory] = (origin, ctime)
                    latest = max(latest, ctime)
        # A later change must get a later ctime than the one recorded: wait out the tick.
        while time.clock_gettime_ns(COARSE_CLOCK) <= latest:
            time.sleep(0.001)
        _write(self.session_dir / RECORD, {d: list(v) for d, v in self.record.items()})
        (self.session_dir / PENDING).unlink(missing_ok=True)


def _write(path: Path, data: object) -> None:
    with contextlib.suppress(OSError):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)


def _names(directory: str) -> tuple[int, set[str]]:
    """ctime and names, the same ctime before and after the listing (no change between)."""
    for _ in range(10):
        ctime = os.lstat(directory).st_ctime_ns
        names = set(os.listdir(directory))
        if os.lstat(directory).st_ctime_ns == ctime:
            return ctime, names
    raise OSError(f"{directory} keeps changing")
