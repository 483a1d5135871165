"""``workspace diff``: unified diffs of pending changes against the real files."""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Iterable

from manager import ui
from manager.changes.display import resolve_paths
from manager.changes.model import select
from manager.commands.common import pager_args
from manager.commands.common import review_context
from manager.commands.common import session_args
from manager.commands.common import still_running
from manager.git import view as gitview
from manager.review import diff_view
from manager.review.grouping import IgnoreQuery
from manager.review.grouping import group
from manager.session import reviewed
from manager.session import shown
from manager.session.sandbox import pending


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("diff", help="show pending changes as unified diffs")
    session_args(p)
    pager_args(p)
    p.add_argument("paths", nargs="*", metavar="PATH", help="only these paths (and below), in full")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    p.add_argument("--all", action="store_true",
                   help="diff ignored files, git internals and large new directories too")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--stat", action="store_true", help="lines changed per file, as git diff --stat")
    form.add_argument("--name-only", action="store_true", help="only the changed paths")
    p.set_defaults(func=show)


def show(args: argparse.Namespace) -> int:
    ctx = review_context(args.project)
    session = ctx.session(args.session)
    project = session.project_path
    expand = args.all or bool(args.paths)
    ignores = IgnoreQuery(project)   # git answers while the walk runs
    reviewed.mark(session)   # before the walk: a write during it counts as unseen
    _, running = still_running(ctx, session)
    if running is not None:
        ui.err(ui.paint(f"note: {running}", "yellow"))
    found = pending(ctx, session, summarize=None if expand else diff_view.MAX_NEW_DIR_FILES,
                    on_found=ignores.ask)
    shown.record(session, found)   # before anything is shown
    groups = group(select(found, resolve_paths(args.paths)), project, expand=expand,
                   ignores=ignores)
    git = gitview.read(project, groups.git, [c for e in groups.project for c in e.members])
    changes, notes = diff_view.reviewed(groups, git, expand=expand)
    colour = {"always": True, "never": False}.get(args.color, ui.use_colour())
    lines: Iterable[str]
    if args.stat:
        lines = diff_view.stat_lines(changes, project)
    elif args.name_only:
        lines = diff_view.name_lines(changes, project)
    else:
        lines = diff_view.full(changes, project, colour)
    notes_shown = [ui.paint(f"# {note}", "dim", colour) for note in notes]
    ui.page(itertools.chain(lines, notes_shown), enabled=not args.no_pager)
    return 0
