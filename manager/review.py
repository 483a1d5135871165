"""Pending changes of a session, as every review command sees them."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from manager import changes as changes_mod
from manager import paths
from manager import store
from manager.changes import Change
from manager.context import Context
from manager.store import Session


def pending(ctx: Context, session: Session) -> list[Change]:
    engine = ctx.engine(session)
    engine.refresh(session)
    layers = engine.layers(session)
    found = changes_mod.read_changes(layers, session.project_path)
    # Writes a sandboxed command made into workspace's own state are never real changes.
    state = paths.state_home()
    return [c for c in found if not (c.path == state or state in c.path.parents)]


def never_committed(ctx: Context) -> list[str]:
    """The user's exclude patterns, and workspace's own state (see ``pending``)."""
    return [*ctx.config["exclude"], str(paths.state_home())]


@contextlib.contextmanager
def upper_at_rest(ctx: Context, session: Session) -> Iterator[list[changes_mod.Layer]]:
    """The session's upper layers, locked and with the engine stopped, so nothing
    changes them while they are applied or dropped (an upper dir must not change
    under a live overlay mount)."""
    engine = ctx.engine(session)
    with store.lock(session, timeout=10):
        engine.release(session)
        yield engine.layers(session)


def resolve_paths(raw: list[str]) -> list[Path]:
    """User-given paths (relative to the cwd) as absolute paths, without following links."""
    return [Path(os.path.abspath(p)) for p in raw]


def display_path(change: Change, project: Path) -> str:
    if change.in_project:
        text = str(change.path.relative_to(project)) if change.path != project else "."
    else:
        text = str(change.path)
    if (change.new_type or change.old_type) is changes_mod.EntryType.DIR:
        text += "/"
    return text
