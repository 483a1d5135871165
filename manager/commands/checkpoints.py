"""``workspace checkpoints [prune]``: list the session's checkpoints, or collect old ones."""

from __future__ import annotations

import argparse
import time
from typing import Any

from manager import ui
from manager.commands.common import json_arg
from manager.commands.common import session_args
from manager.guardrails import actions
from manager.guardrails.state import Checkpoint
from manager.guardrails.target import for_cli
from manager.guardrails.target import require_git


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("checkpoints", help="list checkpoints (or `checkpoints prune`)",
                       description="List the session's checkpoints: id, time, files, lines, "
                                   "message. `prune` drops stale ones and collects the store.")
    session_args(p)
    json_arg(p)
    p.add_argument("action", nargs="?", choices=["list", "prune"], default="list")
    p.add_argument("--all", action="store_true", help="prune: every checkpoint of this session")
    p.add_argument("--older-than", type=float, metavar="DAYS",
                   help="prune: streams idle this long (default checkpoints.max_age_days)")
    p.add_argument("--now", action="store_true",
                   help="prune: also drop unreferenced objects younger than an hour")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    target = for_cli(args.session, args.project)
    require_git(target)
    if args.action == "prune":
        return _prune(target, args)
    items = actions.list_checkpoints(target)
    if args.json:
        ui.dump_json({"session": target.session_id, "checkpoints": items})
        return 0
    if not items:
        ui.out("no checkpoints yet (one is taken at each Stop; `workspace checkpoint` takes one)")
    for item in items:
        ui.out(_line(item))
    return 0


def _line(item: Checkpoint) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(item["time"]))
    return (f"{ui.paint(str(item['id']).rjust(4), 'bold')}  {item['commit'][:10]}  {when}  "
            f"{item['files']:>4} files  {item['lines']:>6} lines  {ui.shown(str(item['message']))}")


def _prune(target: Any, args: argparse.Namespace) -> int:
    report = actions.prune(target, args.all, args.older_than, args.now)
    if args.json:
        ui.dump_json({"removed": report.removed, "size_before": report.size_before,
                      "size_after": report.size_after})
        return 0
    ui.out(f"removed {ui.count(len(report.removed), 'stream')}; store "
           f"{report.size_before / 1e6:.1f} MB -> {report.size_after / 1e6:.1f} MB")
    return 0
