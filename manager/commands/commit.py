"""``workspace commit``: apply pending changes to the real filesystem."""

from __future__ import annotations

import argparse

from manager import ui
from manager.changes.display import resolve_paths
from manager.commands.common import json_arg
from manager.commands.common import session_args
from manager.commit import apply
from manager.commit import btime
from manager.session.context import Context
from manager.session.sandbox import never_committed
from manager.session.sandbox import upper_at_rest


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("commit", help="apply pending changes (all, or the named paths)",
                       description="Apply the session's changes to the real filesystem. A path "
                                   "whose real file changed since the sandbox copied it is a "
                                   "conflict: reported and left pending unless --force.")
    session_args(p)
    p.add_argument("paths", nargs="*", metavar="PATH", help="only these paths (and below)")
    p.add_argument("--force", action="store_true", help="overwrite conflicting real files")
    p.add_argument("--allow-special", action="store_true",
                   help="also commit device nodes, setuid/setgid files and files with "
                        "capabilities (refused otherwise; `workspace status` marks them)")
    json_arg(p)
    p.set_defaults(func=commit)


def commit(args: argparse.Namespace) -> int:
    ctx = Context.load(args.project)
    session = ctx.session(args.session)
    # Less a second: file timestamps come from a coarse clock that lags time.time().
    btime.set_floor(int((session.created - 1) * 1e9))
    with upper_at_rest(ctx, session) as layers:
        result = apply.commit(session.dir, layers, session.project_path,
                              resolve_paths(args.paths), force=args.force,
                              exclude=never_committed(ctx), allow_special=args.allow_special)
    if args.json:
        ui.dump_json(result.as_json())
    else:
        _report(result)
    return 0 if result.ok else 1


def _report(result: apply.CommitResult) -> None:
    if result.resumed:
        ui.out(f"finished an interrupted commit: {len(result.resumed)} path(s) in place")
    ui.out(f"committed {len(result.applied)} path(s)")
    for path in result.skipped:
        ui.out(ui.paint(f"  excluded (still pending): {path}", "dim"))
    for issue in result.conflicts:
        ui.err(ui.paint(f"  conflict: {issue.path}: {issue.reason}", "red"))
    for issue in result.refused:
        ui.err(ui.paint(f"  refused: {issue.path}: {issue.reason}", "red"))
    for issue in result.errors:
        ui.err(ui.paint(f"  error: {issue.path}: {issue.reason}", "red"))
    if result.refused:
        ui.err("refused paths (device nodes, setuid/setgid, file capabilities) were left "
               "pending: review them, then `workspace commit --allow-special PATH` to commit "
               "them, or discard them")
    if result.conflicts:
        ui.err("conflicting paths were left pending: review them with `workspace diff PATH`, "
               "then `workspace commit --force PATH` to overwrite, or discard them")
