"""``workspace diff``: unified diffs of pending changes against the real files."""

from __future__ import annotations

import argparse
import sys

from manager import diff
from manager import review
from manager import ui
from manager.changes import select
from manager.commands.common import session_args
from manager.context import Context


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("diff", help="show pending changes as unified diffs")
    session_args(p)
    p.add_argument("paths", nargs="*", metavar="PATH", help="only these paths (and below)")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    p.set_defaults(func=show)


def show(args: argparse.Namespace) -> int:
    ctx = Context.load(args.project)
    session = ctx.session(args.session)
    changes = select(review.pending(ctx, session), review.resolve_paths(args.paths))
    colour = {"always": True, "never": False}.get(args.color, ui.use_colour())
    sys.stdout.write(diff.render(changes, session.project_path, color=colour))
    return 0
