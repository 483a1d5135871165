"""``workspace status``: what the session changed, grouped like ``git status``."""

from __future__ import annotations

import argparse

from manager import ui
from manager.changes.display import resolve_paths
from manager.changes.model import Change
from manager.changes.model import select
from manager.commands.common import json_arg
from manager.commands.common import pager_args
from manager.commands.common import review_context
from manager.commands.common import session_args
from manager.commands.common import still_running
from manager.git import view as gitview
from manager.review import space
from manager.review import status_view
from manager.review.grouping import IgnoreQuery
from manager.review.grouping import group
from manager.session import reviewed
from manager.session import shown
from manager.session.sandbox import pending
from manager.session.store import Session


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("status", help="list the session's pending changes")
    session_args(p)
    json_arg(p)
    pager_args(p)
    p.add_argument("--all", action="store_true",
                   help="list every file: new directories, ignored files and git internals too")
    p.add_argument("--short", "-s", action="store_true", help="one line per entry")
    p.add_argument("--network", action="store_true",
                   help="only the egress record: each call's connection attempts (setting network)")
    p.add_argument("paths", nargs="*", metavar="PATH", help="only these paths (listed in full)")
    p.set_defaults(func=status)


def status(args: argparse.Namespace) -> int:
    ctx = review_context(args.project)
    session = ctx.session(args.session)
    if args.network:
        return _network_only(session, as_json=args.json)
    drift = ctx.engine_drift(session)
    if drift is not None:   # shown, not kept: it holds as long as the configuration says it
        session.notes = [*session.notes, f"engine: {drift}"]
    running, note = still_running(ctx, session)
    if note is not None:
        session.notes = [*session.notes, note]
    expand = args.all or bool(args.paths) or args.json
    # Started before the walk, git answers while it runs (not for --json: no groups).
    ignores = None if args.json else IgnoreQuery(session.project_path)
    reviewed.mark(session)   # before the walk: a write during it counts as unseen
    everything = pending(ctx, session, summarize=None if expand else 0,
                         on_found=ignores.ask if ignores else None)
    shown.record(session, everything)   # before anything is shown
    found = select(everything, resolve_paths(args.paths))
    if args.json:
        ui.dump_json({**as_json(session, found), "running": running})
        return 0
    ui.page(render(session, found, expand=expand, short=args.short, ignores=ignores),
            enabled=not args.no_pager)
    return 0


def as_json(session: Session, found: list[Change]) -> dict[str, object]:
    from manager.egress import record

    return {"session": session.id, "engine": session.engine, "project": session.project,
            "notes": list(session.notes), "changes": [c.as_json() for c in found],
            "network": record.as_json(session.sandbox), "disk": space.of(session.sandbox)}


def render(session: Session, found: list[Change], *, expand: bool, short: bool,
           ignores: IgnoreQuery | None = None) -> list[str]:
    project = session.project_path
    groups = group(found, project, expand=expand, ignores=ignores)
    git = gitview.read(project, groups.git, [c for e in groups.project for c in e.members])
    if short:
        return status_view.short_form(groups, git, project)
    out = [f"session {ui.paint(session.id, 'bold')} ({session.engine}) in {ui.quote(session.project)}"]
    out.extend(ui.paint(f"  note: {note}", "dim") for note in session.notes)
    out.extend(_network(session))
    low = space.warning(space.of(session.sandbox))
    if low is not None:
        out.append(ui.paint(f"  {low}", "red"))
    if not found:
        return [*out, "nothing pending: the sandbox holds no changes"]
    out.extend(status_view.long_form(groups, git, project, ui.paint, expand))
    out.append(ui.paint("  (workspace diff to review; workspace commit [PATH...] to apply; "
                        "workspace discard --yes [PATH...] to drop)", "dim"))
    return out


def _network_only(session: Session, as_json: bool) -> int:
    """``--network``: the record per call, without walking the changes."""
    from manager.egress import record

    if as_json:
        data = record.as_json(session.sandbox)
        ui.dump_json({"session": session.id, **data, "calls": record.by_call(data["record"])})
        return 0
    for line in record.render_calls(session.sandbox):
        ui.out(ui.paint(line, "red") if "REFUSED" in line else line)
    return 0


def _network(session: Session) -> list[str]:
    """The egress record's section (setting ``network``), refused hosts painted first."""
    from manager.egress import record

    lines = record.render(session.sandbox)
    return [ui.paint(line, "red") if "REFUSED" in line else line for line in lines]
