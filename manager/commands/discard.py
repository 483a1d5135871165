"""``workspace discard``: drop pending changes (all, or the named paths)."""

from __future__ import annotations

import argparse

from manager import ui
from manager.changes.display import resolve_paths
from manager.commands.common import json_arg
from manager.commands.common import review_context
from manager.commands.common import session_args
from manager.commit import apply
from manager.errors import WorkspaceError
from manager.session import shown
from manager.session.sandbox import upper_at_rest


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("discard", help="drop pending changes for good")
    session_args(p)
    p.add_argument("paths", nargs="*", metavar="PATH", help="only these paths (and below)")
    p.add_argument("--yes", action="store_true", help="really drop them (required)")
    json_arg(p)
    p.set_defaults(func=discard)


def discard(args: argparse.Namespace) -> int:
    if not args.yes:
        raise WorkspaceError("discard drops changes for good", hint="add --yes to confirm")
    ctx = review_context(args.project)
    session = ctx.session(args.session)
    with upper_at_rest(ctx, session) as layers:
        dropped = apply.discard(session.dir, layers, session.project_path,
                                resolve_paths(args.paths), progress=ui.progress("discarded"))
        shown.forget_gone(session, dropped=[c.real_path for c in dropped],
                          everything=not args.paths)
    if args.json:
        ui.dump_json({"discarded": [c.as_json() for c in dropped]})
    else:
        ui.out(f"discarded {ui.count(len(dropped), 'change')}")
    return 0
