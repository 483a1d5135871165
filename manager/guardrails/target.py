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
    """The session :meth:`Context.find_session` resolves, else the latest hook-only state
    (guard rails may hold state for a session whose record does not exist yet)."""
    from manager.guardrails import state as guardstate

    ctx = Context.load(project)
    found = ctx.find_session(session_id)
    if found is not None:
        # A session named by id keeps its own project's settings.
        return _make(found.id, ctx if found.project_path == ctx.project
                     else Context.load(found.project), found)
    if not session_id:
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


def not_in_git(target: Target) -> str:
    """The one wording of "the guard rails are off here"."""
    return f"{target.ctx.project} is not in a git repository: the diff budget and checkpoints are off here"


def require_git(target: Target) -> Shadow:
    if target.shadow is None:
        raise WorkspaceError(not_in_git(target))
    return target.shadow
