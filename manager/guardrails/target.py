"""What the guard rails act on: a session id, its project, and (if any) its sandbox."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from manager.changes.model import Change
from manager.errors import WorkspaceError
from manager.guardrails.shadow import Shadow
from manager.guardrails.shadow import Snapshot
from manager.guardrails.shadow import open_shadow
from manager.guardrails.shadow import take
from manager.session import store
from manager.session.context import Context
from manager.session.context import find_project
from manager.session.store import Session


@dataclass
class Target:
    session_id: str
    ctx: Context
    session: Session | None      # None until the first sandboxed command creates it
    shadow: Shadow | None        # None outside git: the feature is off

    def overlay(self) -> list[Change]:
        if self.session is None:
            return []
        from manager.session.sandbox import pending

        return pending(self.ctx, self.session)

    def snapshot(self) -> Snapshot:
        assert self.shadow is not None
        return take(self.shadow, self.overlay())


def for_hook(session_id: str, cwd: str | None) -> Target:
    """The hook payload's session: the workspace session of that id, else the project at ``cwd``."""
    session = store.load(session_id) if store.exists(session_id) else None
    project = session.project_path if session is not None else find_project(Path(cwd or ".").resolve())
    return _make(session_id, Context.load(str(project)), session)


def for_cli(session_id: str | None, project: str | None) -> Target:
    """``--session``, else the project's current session, else the latest hook-only state."""
    from manager.guardrails import state as guardstate

    ctx = Context.load(project)
    if session_id and store.exists(session_id):
        session = store.load(session_id)
        return _make(session.id, Context.load(session.project), session)
    if not session_id:
        found = store.current(ctx.project)
        if found is not None:
            return _make(found.id, ctx, found)
        session_id = guardstate.latest_for(ctx.project)
    state = guardstate.read(session_id) if session_id else {}
    if not session_id or not state:
        raise WorkspaceError(f"no workspace session for {ctx.project}",
                             hint="pass --session ID (`workspace sessions` lists them)")
    return _make(session_id, Context.load(state.get("guard_project") or str(ctx.project)), None)


def _make(session_id: str, ctx: Context, session: Session | None) -> Target:
    from manager.guardrails import state as guardstate

    guardstate.read_side(session_id)   # unreadable or newer: stop before any snapshot is taken
    return Target(store.validate_id(session_id), ctx, session, open_shadow(ctx.project))


def require_git(target: Target) -> Shadow:
    if target.shadow is None:
        raise WorkspaceError(f"{target.ctx.project} is not in a git repository: "
                             "budget and checkpoints are off here")
    return target.shadow
