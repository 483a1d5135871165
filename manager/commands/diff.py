"""``workspace diff``: unified diffs of pending changes against the real files."""

from __future__ import annotations

import argparse
import sys

from manager import ui
from manager.changes import diff
from manager.changes.display import resolve_paths
from manager.changes.model import select
from manager.commands.common import session_args
from manager.session.context import Context
from manager.session.sandbox import pending


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("diff", help="show pending changes as unified diffs")
    session_args(p)
    p.add_argument("paths", nargs="*", metavar="PATH", help="only these paths (and below)")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    p.set_defaults(func=show)


def show(args: argparse.Namespace) -> int:
    ctx = Context.load(args.project)
    session = ctx.session(args.session)
    changes = select(pending(ctx, session), resolve_paths(args.paths))
    colour = {"always": True, "never": False}.get(args.color, ui.use_colour())
    sys.stdout.write(diff.render(changes, session.project_path, color=colour))
    return 0
