"""Session liveness, and garbage collection of sessions whose client is gone."""

from __future__ import annotations

import time
from dataclasses import dataclass
from dataclasses import field

from manager import store
from manager.context import Context
from manager.engines import procs
from manager.errors import WorkspaceError
from manager.store import Session


def process_start(pid: int) -> int | None:
    return procs.start_time(pid)


def client_alive(session: Session) -> bool | None:
    """True/False for sessions tied to a client process; None when there is none."""
    if session.client_pid is None:
        return None
    start = process_start(session.client_pid)
    return start is not None and (session.client_start is None or start == session.client_start)


def is_stale(session: Session, max_age_days: float, now: float | None = None) -> bool:
    alive = client_alive(session)
    if alive is False:
        return True
    idle = (now or time.time()) - session.updated
    return idle > max_age_days * 86400


def describe(session: Session) -> dict[str, object]:
    alive = client_alive(session)
    try:
        current = store.current_id(session.project_path) == session.id
    except WorkspaceError:
        current = False
    state = {True: "active", False: "orphaned", None: "cli"}[alive]
    return {"id": session.id, "project": session.project, "engine": session.engine,
            "origin": session.origin, "created": session.created, "updated": session.updated,
            "state": state, "current": current, "engine_source": session.engine_source,
            "notes": list(session.notes)}


@dataclass
class GcReport:
    removed: list[str] = field(default_factory=list)
    kept: list[tuple[str, int]] = field(default_factory=list)   # (id, pending changes)
    errors: list[str] = field(default_factory=list)


def collect(dry_run: bool = False) -> GcReport:
    from manager import review

    report = GcReport()
    sessions, errors = store.list_sessions()
    report.errors.extend(str(e) for e in errors)
    for session in sessions:
        ctx = Context.load(session.project)
        if not is_stale(session, ctx.config["gc.max_age_days"]):
            continue
        try:
            pending = len(review.pending(ctx, session))
            if pending:
                report.kept.append((session.id, pending))
                if not dry_run:
                    ctx.engine(session).release(session)
                continue
            report.removed.append(session.id)
            if not dry_run:
                with store.lock(session, timeout=5):
                    ctx.engine(session).destroy(session)
                store.remove(session)
        except WorkspaceError as exc:
            report.errors.append(f"{session.id}: {exc}")
    return report
