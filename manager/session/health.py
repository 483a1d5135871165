"""Which sessions have state this release cannot read, and the fix for each.

``workspace doctor`` lists them; ``workspace gc`` keeps them (what cannot be read
cannot be known to be empty). A record in a newer format names the release that
wrote it; a corrupt one names the file to inspect.
"""

from __future__ import annotations

import contextlib
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


def check_session(session_id: str) -> list[Unreadable]:
    """What of one session's state cannot be read (empty: all of it can)."""
    from manager.commit import journal
    from manager.guardrails import state as guardstate

    found = []
    directory = paths.sessions_dir() / session_id
    record = directory / store.RECORD
    for path, read in ((record, lambda: record.exists() and store.load(session_id)),
                       (directory / "claude.json", lambda: _claude(directory / "claude.json")),
                       (journal.path_for(directory), lambda: journal.read(directory)),
                       (guardstate.side_file(session_id), lambda: guardstate.read_side(session_id))):
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


def survey() -> list[Unreadable]:
    """Every session (and hook-only guard-rail state) that cannot be read."""
    found: list[Unreadable] = []
    root = paths.sessions_dir()
    ids = {p.name for p in root.iterdir() if p.is_dir()} if root.is_dir() else set()
    guard_dir = paths.state_home() / "guardrails"
    if guard_dir.is_dir():
        ids |= {p.stem for p in guard_dir.glob("*.json")}
    for session_id in sorted(ids):
        try:
            store.validate_id(session_id)
        except StateError:
            continue
        found.extend(check_session(session_id))
    return found
