"""Per-session state of the guard rails (diff budget, checkpoints).

This module is its one owner: it is kept in
``$XDG_STATE_HOME/workspace/guardrails/<id>.json`` and written only by
:func:`edit`, under that file's lock. Not in the session record: hooks fire
before the first sandboxed command creates the session (SessionStart, a Stop
after direct edits only), a discarded or collected sandbox must not take the
session's checkpoints with it, and a second writer of ``session.json`` outside
the session lock would overwrite its other writers' saves. Records of older
versions kept a mirror in ``session.extra``: it is still read when there is no
side file.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from typing import NotRequired
from typing import TypedDict

from manager import versioning
from manager.errors import StateError
from manager.fs.util import locked
from manager.fs.util import write_json_atomic
from manager.session import paths
from manager.session import store

KEYS = ("budget", "checkpoints", "guard_project")


# -- the schema ----------------------------------------------------------------------


class Stream(TypedDict):
    """A chain of checkpoint commits on one base commit (ref ``refs/ws/<session>/<n>-<base>``)."""

    n: int
    base: str | None              # HEAD when the stream began (None: an unborn branch)
    base_tree: NotRequired[str]   # the base commit's tree, looked up once
    tip: str | None               # the last checkpoint commit of the stream
    tip_tree: str | None
    files: list[str]              # paths the stream's checkpoints changed


class Checkpoint(TypedDict):
    id: int
    commit: str
    tree: str                     # the project as the sandbox showed it
    worktree: str                 # the real work tree (differs while the overlay holds changes)
    base: str | None
    stream: int
    time: float
    files: int
    lines: int
    message: str
    auto: bool


class Checkpoints(TypedDict):
    next_id: int
    next_stream: int
    stream: Stream | None         # None: the next checkpoint starts a fresh stream
    items: list[Checkpoint]


class LastMeasure(TypedDict):
    view: str                     # the tree measured, and its changes (budget.FileChange)
    changes: list[list[Any]]


class Blocks(TypedDict, total=False):
    blocks: int                   # blocks in the current stop sequence


class Budget(TypedDict, total=False):
    baseline: str                 # the tree the budget counts from (kept by refs/ws-base/)
    head: str | None
    time: float
    blocks: int                   # the main agent's blocks in its stop sequence
    agent_blocks: dict[str, Blocks]
    last: LastMeasure


class GuardState(TypedDict, total=False):
    """``guardrails/<id>.json``."""

    budget: Budget
    checkpoints: Checkpoints
    guard_project: str            # the project of a session known only from hooks


def _dir() -> Path:
    return paths.state_home() / "guardrails"


def side_file(session_id: str) -> Path:
    return _dir() / f"{store.validate_id(session_id)}.json"


def session_ids() -> set[str]:
    """Sessions with a side file (the hook may write one before any session record)."""
    return {p.stem for p in _dir().glob("*.json")} if _dir().is_dir() else set()


def read(session_id: str) -> GuardState:
    """The state (a copy), empty when there is none yet."""
    state = read_side(session_id)
    if not state and store.exists(session_id):
        extra = store.load(session_id).extra
        state = _as_state({k: extra[k] for k in KEYS if k in extra})
    return state


def read_side(session_id: str) -> GuardState:
    """The side file's state; an unreadable one is an error, never taken for empty (a
    write would replace it, and the checkpoints it lists)."""
    path = side_file(session_id)
    try:
        raw = versioning.load("guardrails", path)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise StateError(f"guard-rail state {path} is unreadable ({exc}); nothing was changed",
                         hint=f"inspect {path}; removing it forgets the session's checkpoint "
                              "list (the checkpoints stay in the store)") from exc
    if not isinstance(raw, dict):
        raise StateError(f"guard-rail state {path} is malformed; nothing was changed",
                         hint=f"inspect {path}")
    return _as_state({k: v for k, v in raw.items() if k not in (versioning.KEY, versioning.BY)})


def _as_state(raw: Any) -> GuardState:
    """JSON read back: the shape :func:`edit` wrote (anything but a mapping reads as empty)."""
    mapping = isinstance(raw, dict)
    state: GuardState = raw if mapping else {}      # raw stays Any: the shape edit() wrote
    return state


def readable(session_id: str) -> StateError | None:
    """Why the side file of ``session_id`` cannot be read, or None."""
    try:
        read_side(session_id)
    except StateError as exc:
        return exc
    return None


@contextlib.contextmanager
def edit(session_id: str) -> Iterator[GuardState]:
    """Read-modify-write the state under a lock of our own.

    The session lock is not used: running commands hold it shared for as long
    as they run, and a Stop hook must not wait for them.
    """
    _dir().mkdir(parents=True, exist_ok=True)
    with locked(_dir() / f"{store.validate_id(session_id)}.lock", timeout=30,
                what=f"guard-rail state of {session_id}"):
        state = read(session_id)
        before = _canonical(state)
        yield state
        if _canonical(state) != before:   # a Stop that changed nothing writes nothing
            _write(session_id, state)


def _canonical(state: GuardState) -> str:
    return json.dumps(state, sort_keys=True)


def _write(session_id: str, state: GuardState) -> None:
    write_json_atomic(side_file(session_id), versioning.stamp("guardrails", dict(state)))


def forget_idle(max_age_days: float) -> list[str]:
    """Remove the state of sessions idle that long whose sandbox is gone; their ids."""
    if not _dir().is_dir():
        return []
    cutoff = time.time() - max_age_days * 86400
    gone = []
    for path in _dir().glob("*.json"):
        if (path.stat().st_mtime < cutoff and not store.exists(path.stem)
                and readable(path.stem) is None):   # what we cannot read, we keep
            path.unlink(missing_ok=True)
            gone.append(path.stem)
    return gone


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
        try:
            state = read_side(path.stem)
        except StateError:
            continue
        if state.get("guard_project") == str(project):
            found.append((path.stat().st_mtime, path.stem))
    return max(found)[1] if found else None
