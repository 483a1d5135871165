"""``workspace budget``: how much of the diff budget the session has used, file by file."""

from __future__ import annotations

import argparse

from manager import ui
from manager.commands.common import json_arg
from manager.commands.common import said_guard_rails_off
from manager.commands.common import session_args
from manager.guardrails import actions
from manager.guardrails.budget import Report
from manager.guardrails.budget import format_count
from manager.guardrails.target import for_cli


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("budget", help="show the diff budget: used/limit and the files",
                       description="Changes since the baseline (session start or the last "
                                   "`workspace reset`), pending sandbox changes included.")
    session_args(p)
    json_arg(p)
    p.set_defaults(func=show)


def show(args: argparse.Namespace) -> int:
    target = for_cli(args.session, args.project)
    if said_guard_rails_off(target, args.json):
        return 0
    report = actions.measure(target)
    if args.json:
        ui.dump_json({"session": target.session_id, "enabled": True, **report.as_json()})
        return 0
    _print(target.session_id, report)
    return 0


def _print(session_id: str, report: Report) -> None:
    if report.notice:
        ui.err(f"workspace: {report.notice}")
    colour = "red" if report.over else "green"
    ui.out(f"session {session_id}: " + ui.paint(report.figure(), colour))
    for f in report.biggest(len(report.files)):
        counts = "binary" if f.kind == "binary" else "submodule" if f.kind == "submodule" \
            else f"+{f.added} -{f.deleted}"
        ui.out(f"  {format_count(f.cost):>7}  {counts:<14} {ui.quote(str(f.path))}")
    if report.over:
        ui.out(ui.paint("  (review, then `workspace reset` to start a new budget)", "dim"))
