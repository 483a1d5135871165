"""``workspace checkpoint``: record the project's current state now."""

from __future__ import annotations

import argparse

from manager import ui
from manager.commands.common import json_arg
from manager.commands.common import session_args
from manager.guardrails import actions
from manager.guardrails.target import for_cli
from manager.guardrails.target import require_git


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("checkpoint", help="take a checkpoint of the current state",
                       description="Record the work tree plus the sandbox's view of the project "
                                   "as a checkpoint (`workspace rewind ID` goes back to it).")
    session_args(p)
    json_arg(p)
    p.add_argument("-m", "--message", default="", help="a note shown in `workspace checkpoints`")
    p.set_defaults(func=take)


def take(args: argparse.Namespace) -> int:
    target = for_cli(args.session, args.project)
    require_git(target)
    item = actions.checkpoint(target, args.message or "manual")
    if args.json:
        ui.dump_json({"session": target.session_id, "checkpoint": item})
    elif item is None:
        ui.out("nothing changed since the last checkpoint; none taken")
    else:
        ui.out(f"checkpoint {item['id']} ({item['commit'][:10]}): "
               f"{ui.count(item['files'], 'file')}, {ui.count(item['lines'], 'line')} changed")
    return 0
