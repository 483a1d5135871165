"""Per-session state of the guard rails (diff budget, checkpoints).

It lives in the workspace session's record (``session.extra["budget"]`` and
``["checkpoints"]``) when the session exists. Hooks can fire before the first
sandboxed command creates the session (SessionStart, a Stop with only direct
edits), so until then it lives in ``$XDG_STATE_HOME/workspace/guardrails/<id>.json``
and is adopted into the record once the session appears.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from manager import paths
from manager import store
from manager.fsutil import locked
from manager.fsutil import write_json_atomic

KEYS = ("budget", "checkpoints", "guard_project")


def _dir() -> Path:
    return paths.state_home() / "guardrails"


def _side_file(session_id: str) -> Path:
    return _dir() / f"{store.validate_id(session_id)}.json"


def read(session_id: str) -> dict[str, Any]:
    """The state (a copy), empty when there is none yet."""
    state = _read_side(session_id)
    if store.exists(session_id):
        extra = store.load(session_id).extra
        state.update({k: extra[k] for k in KEYS if k in extra})
    return state


def _read_side(session_id: str) -> dict[str, Any]:
    try:
        raw = json.loads(_side_file(session_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


@contextlib.contextmanager
def edit(session_id: str) -> Iterator[dict[str, Any]]:
    """Read-modify-write the state under a lock of our own.

    The session lock is not used: running commands hold it shared for as long
    as they run, and a Stop hook must not wait for them.
    """
    _dir().mkdir(parents=True, exist_ok=True)
    with locked(_dir() / f"{store.validate_id(session_id)}.lock", timeout=30,
                what=f"guard-rail state of {session_id}"):
        state = read(session_id)
        yield state
        _write(session_id, state)


def _write(session_id: str, state: dict[str, Any]) -> None:
    if not store.exists(session_id):
        write_json_atomic(_side_file(session_id), state)
        return
    # Reload just before saving, to keep the window for clobbering others' edits small.
    session = store.load(session_id)
    session.extra.update({k: v for k, v in state.items() if k in KEYS})
    store.save(session)
    _side_file(session_id).unlink(missing_ok=True)


def known_ids() -> set[str]:
    """Session ids that have guard-rail state (side files or session records)."""
    ids = {p.stem for p in _dir().glob("*.json")} if _dir().is_dir() else set()
    sessions, _ = store.list_sessions()
    return ids | {s.id for s in sessions}


def latest_for(project: Path) -> str | None:
    """The most recently written hook-only state for ``project``."""
    if not _dir().is_dir():
        return None
    found = []
    for path in _dir().glob("*.json"):
        state = _read_side(path.stem)
        if state.get("guard_project") == str(project):
            found.append((path.stat().st_mtime, path.stem))
    return max(found)[1] if found else None
