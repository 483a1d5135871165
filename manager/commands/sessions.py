"""``workspace sessions``: every session, its project, engine and state."""

from __future__ import annotations

import argparse
import time

from manager import ui
from manager.commands.common import json_arg
from manager.session import lifecycle
from manager.session import store


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("sessions", help="list sessions")
    json_arg(p)
    p.set_defaults(func=sessions)


def sessions(args: argparse.Namespace) -> int:
    found, errors = store.list_sessions()
    rows = [_with_where(lifecycle.describe(s), s) for s in found]
    if args.json:
        ui.dump_json({"sessions": rows, "errors": [str(e) for e in errors]})
        return 0
    if not rows:
        ui.out("no sessions")
    for row in rows:
        age = _age(float(str(row["updated"])))
        current = "*" if row["current"] else " "
        ui.out(f"{current} {row['id']:<40} {row['engine']:<8} {row['state']:<9} "
               f"{age:>6}  {ui.quote(str(row['project']))}"
               + (f"  on {row['where']}" if row["where"] != "local" else ""))
    for error in errors:
        ui.err(f"workspace: warning: {error}")
    return 0


def _with_where(row: dict[str, object], session: store.Session) -> dict[str, object]:
    """Where the session's sandbox runs: "local", or a remote engine's host or context."""
    from manager.engines.container.remote import where_runs

    return {**row, "where": where_runs(session.sandbox)}


def _age(when: float) -> str:
    seconds = max(0, time.time() - when)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return "now"
