"""Session liveness, and garbage collection of sessions whose client is gone."""

from __future__ import annotations

import time
from dataclasses import dataclass
from dataclasses import field
from typing import TYPE_CHECKING

from manager import config
from manager.engines import procs
from manager.engines import registry
from manager.engines.base import leaves_containers
from manager.errors import WorkspaceError
from manager.session import health
from manager.session import store
from manager.session.context import Context
from manager.session.store import Session

if TYPE_CHECKING:
    from collections.abc import Sequence

    from manager.engines.base import LeavesContainers
    from manager.engines.container.cli import Labelled


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
    # Containers removed: {"engine", "name", "session", "reason"}.
    containers: list[dict[str, str]] = field(default_factory=list)


def collect(owned: Sequence[health.Record] = (), dry_run: bool = False) -> GcReport:
    """Sweep stale sessions; ``owned``: the records other packages keep for a session, which
    must be readable too (see :func:`manager.session.health.check_session`)."""
    report = GcReport()
    sessions, errors = store.list_sessions()
    report.errors.extend(str(e) for e in errors)
    stale: list[tuple[Session, Context]] = []
    for session in sessions:
        unreadable = health.check_session(session.id, owned)
        if unreadable:   # what cannot be read cannot be known to be empty: kept
            report.errors.extend(f"{session.id}: kept, {u.problem} (fix: {u.fix})"
                                 for u in unreadable)
            continue
        ctx = Context.load(session.project)
        if is_stale(session, ctx.config["gc.max_age_days"]):
            stale.append((session, ctx))
    _sweep_containers(report, {s.id: ctx for s, ctx in stale}, dry_run)
    for session, ctx in stale:
        _collect_session(report, session, ctx, dry_run)
    return report


def _sweep_containers(report: GcReport, stale: dict[str, Context], dry_run: bool) -> None:
    """Remove our containers whose session is gone or stale.

    Their changes are in the session's upper dir on the host, never in the
    container (volume mode exports them first: ``release``), so nothing is lost.
    """
    for name in registry.CONTAINER_ENGINES:
        engine = registry.make(name, config.load(None))
        if not leaves_containers(engine):
            continue
        for found in engine.labelled():
            try:
                reason = _sweep_one(engine, found, stale, dry_run)
            except WorkspaceError as exc:
                report.errors.append(f"container {found.name}: {exc}")
                continue
            if reason:
                report.containers.append({"engine": name, "name": found.name,
                                          "session": found.session, "reason": reason})


def _sweep_one(engine: LeavesContainers, found: Labelled, stale: dict[str, Context],
               dry_run: bool) -> str | None:
    """Why ``found`` goes ("session gone" or "session stale"), removing it unless dry; or None."""
    if not (store.session_dir(found.session) / store.RECORD).exists():
        if not dry_run:
            engine.remove_orphan(found)
        return "session gone"
    if found.session not in stale:
        return None
    if not dry_run:
        # release, not a bare removal: it refuses while calls run (and exports volume mode).
        registry.make(found.engine, stale[found.session].config).release(store.load(found.session))
    return "session stale"


def _collect_session(report: GcReport, session: Session, ctx: Context, dry_run: bool) -> None:
    from manager.session.sandbox import pending

    try:
        count = len(pending(ctx, session))
        if count:
            report.kept.append((session.id, count))
            if not dry_run:
                ctx.engine(session).release(session)
            return
        report.removed.append(session.id)
        if not dry_run:
            with store.lock(session, timeout=5):
                ctx.engine(session).destroy(session)
            store.remove(session)
    except WorkspaceError as exc:
        report.errors.append(f"{session.id}: {exc}")
