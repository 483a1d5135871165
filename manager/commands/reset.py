"""``workspace reset``: start a new diff budget at the current state (idempotent)."""

from __future__ import annotations

import argparse

from manager import ui
from manager.commands.common import json_arg
from manager.commands.common import said_guard_rails_off
from manager.commands.common import session_args
from manager.guardrails import actions
from manager.guardrails.target import for_cli


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("reset", help="re-baseline the diff budget after a review",
                       description="Record the current state (work tree plus the sandbox's "
                                   "pending changes) as the diff budget's baseline.")
    session_args(p)
    json_arg(p)
    p.set_defaults(func=reset)


def reset(args: argparse.Namespace) -> int:
    target = for_cli(args.session, args.project)
    if said_guard_rails_off(target, args.json):
        return 0
    state = actions.reset(target)
    if args.json:
        ui.dump_json({"session": target.session_id, "enabled": True, **state})
    else:
        ui.out(f"diff budget reset for session {target.session_id}: "
               f"0/{target.ctx.config['budget.limit']} from now")
    return 0
