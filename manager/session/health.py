"""Which sessions have state this release cannot read, and the fix for each.

``workspace doctor`` lists them; ``workspace gc`` keeps them (what cannot be read
cannot be known to be empty). A record in a newer format names the release that
wrote it; a corrupt one names the file to inspect.

The session's own records (``session.json``, ``claude.json``) are read here; the
records other packages own (the commit journal, the guard-rail state) are passed
in by the caller as :class:`Record` readers, so this module never reaches up a
layer (``manager.commands.common.owned_records`` lists them).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from manager import versioning
from manager.errors import StateError
from manager.session import paths
from manager.session import store


@dataclass(frozen=True)
class Unreadable:
    session: str
    path: str
    problem: str
    fix: str

    def as_json(self) -> dict[str, str]:
        return {"session": self.session, "path": self.path, "problem": self.problem,
                "fix": self.fix}


@dataclass(frozen=True)
class Record:
    """One kind of record a session may have, read the way its owner reads it."""

    path: Callable[[str], Path]         # session id -> where the record is
    read: Callable[[str], object]       # raises StateError when it cannot be read
    # Ids with such a record where no session directory is (e.g. hook-only state).
    sessions: Callable[[], set[str]] = set


def check_session(session_id: str, owned: Sequence[Record] = ()) -> list[Unreadable]:
    """What of one session's state cannot be read (empty: all of it can): its own records,
    and those ``owned`` by other packages."""
    found = []
    directory = paths.sessions_dir() / session_id
    record = directory / store.RECORD
    readers: list[tuple[Path, Callable[[], object]]] = [
        (record, lambda: record.exists() and store.load(session_id)),
        (directory / "claude.json", lambda: _claude(directory / "claude.json"))]
    readers += [(r.path(session_id), functools.partial(r.read, session_id)) for r in owned]
    for path, read in readers:
        try:
            read()
        except StateError as exc:
            found.append(_describe(session_id, path, exc))
    return found


def _claude(path: Path) -> None:
    # Corrupt hook state is rebuilt from the session record; only a newer one is kept.
    with contextlib.suppress(FileNotFoundError, ValueError):
        versioning.load("claude", path)


def _describe(session_id: str, path: Path, exc: StateError) -> Unreadable:
    if isinstance(exc, versioning.NewerFormat):
        fix = (f"{exc.hint}; until then leave {path.parent} alone "
               "(this release neither reads nor removes it)")
    else:
        fix = (f"{exc.hint or f'inspect {path}'}; the session's pending changes are in "
               f"{path.parent / store.SANDBOX if path.name == store.RECORD else 'its sandbox'}")
    return Unreadable(session_id, str(path), exc.message, fix)


def survey(owned: Sequence[Record] = ()) -> list[Unreadable]:
    """Every session (and record outside a session directory) that cannot be read."""
    found: list[Unreadable] = []
    root = paths.sessions_dir()
    ids = {p.name for p in root.iterdir() if p.is_dir()} if root.is_dir() else set()
    for record in owned:
        ids |= record.sessions()
    for session_id in sorted(ids):
        try:
            store.validate_id(session_id)
        except StateError:
            continue
        found.extend(check_session(session_id, owned))
    return found
