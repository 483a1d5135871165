"""``workspace status``: what the session changed, grouped like ``git status``."""

from __future__ import annotations

import argparse
import os

from manager import ui
from manager.changes import meta
from manager.changes.display import display_path
from manager.changes.model import Change
from manager.changes.model import EntryType
from manager.changes.model import Kind
from manager.commands.common import json_arg
from manager.commands.common import session_args
from manager.session.context import Context
from manager.session.sandbox import pending
from manager.session.store import Session

COLOUR = {Kind.ADDED: "green", Kind.MODIFIED: "yellow", Kind.MODE: "yellow",
          Kind.XATTRS: "yellow", Kind.DELETED: "red", Kind.REPLACED: "blue"}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("status", help="list the session's pending changes")
    session_args(p)
    json_arg(p)
    p.set_defaults(func=status)


def status(args: argparse.Namespace) -> int:
    ctx = Context.load(args.project)
    session = ctx.session(args.session)
    found = pending(ctx, session)
    if args.json:
        ui.dump_json(as_json(session, found))
    else:
        show(session, found)
    return 0


def as_json(session: Session, found: list[Change]) -> dict[str, object]:
    return {"session": session.id, "engine": session.engine, "project": session.project,
            "notes": list(session.notes), "changes": [c.as_json() for c in found]}


def show(session: Session, found: list[Change]) -> None:
    ui.out(f"session {ui.paint(session.id, 'bold')} ({session.engine}) in {session.project}")
    for note in session.notes:
        ui.out(ui.paint(f"  note: {note}", "dim"))
    inside = [c for c in found if c.in_project]
    outside = [c for c in found if not c.in_project]
    if not found:
        ui.out("nothing pending: the sandbox holds no changes")
        return
    _group("Changes in the project:", inside, session)
    _group("Changes elsewhere on the system:", outside, session)
    ui.out(ui.paint("  (workspace diff to review; workspace commit [PATH...] to apply; "
                    "workspace discard --yes [PATH...] to drop)", "dim"))


def _group(title: str, found: list[Change], session: Session) -> None:
    if not found:
        return
    ui.out(title)
    for change in found:
        label = f"{change.kind.value}:".ljust(10)
        line = f"  {label} {display_path(change, session.project_path)}"
        if change.special:
            line += f"  [{', '.join(change.special)}: commit needs --allow-special]"
            ui.out(ui.paint(line, "red"))
            continue
        ui.out(ui.paint(line + _type_note(change), COLOUR[change.kind]))
    ui.out()


def _type_note(change: Change) -> str:
    """Fifos and sockets by name: "added: x" alone reads as a file."""
    if change.new_type is not EntryType.OTHER:
        return ""
    try:
        name = meta.type_name(os.lstat(change.upper).st_mode)
    except OSError:
        return ""
    return f"  [{name}]" if name else ""
