"""``workspace rewind ID``: restore the work tree and the sandbox's view to a checkpoint."""

from __future__ import annotations

import argparse

from manager import ui
from manager.commands.common import json_arg
from manager.commands.common import session_args
from manager.guardrails import actions
from manager.guardrails.target import for_cli


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("rewind", help="go back to a checkpoint (undoable)",
                       description="Checkpoint the current state, then restore the work tree "
                                   "and the sandbox's view of the project to checkpoint ID "
                                   "(a number from `workspace checkpoints` or a commit prefix).")
    session_args(p)
    json_arg(p)
    p.add_argument("id", metavar="ID")
    p.set_defaults(func=rewind)


def rewind(args: argparse.Namespace) -> int:
    target = for_cli(args.session, args.project)
    result = actions.rewind(target, args.id)
    if args.json:
        ui.dump_json({"session": target.session_id, **result.as_json()})
        return 0
    ui.out(f"rewound to checkpoint {result.rewound_to} ({ui.count(result.paths, 'path')} restored)")
    if result.undo is not None:
        ui.out(ui.paint(f"  (undo with `workspace rewind {result.undo}`)", "dim"))
    return 0
