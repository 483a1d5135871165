"""``workspace doctor``: what works on this host, and the fix for what does not."""

from __future__ import annotations

import argparse

from manager import ui
from manager.commands.common import json_arg
from manager.commands.common import owned_records
from manager.engines import registry
from manager.engines.base import Check
from manager.errors import WorkspaceError
from manager.session import health
from manager.session.context import Context


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("doctor", help="check which engines work here")
    p.add_argument("--project", metavar="DIR", help="project directory (default: from the cwd)")
    p.add_argument("--engine", action="append", help="check only this engine (repeatable)")
    json_arg(p)
    p.set_defaults(func=doctor)


def doctor(args: argparse.Namespace) -> int:
    ctx = Context.load(args.project)
    names = args.engine or list(registry.AUTO_ORDER)
    results = {name: _checks(name, ctx) for name in names}
    try:
        chosen, source, _ = registry.resolve(ctx.config)
        choice: dict[str, str | None] = {"engine": chosen, "source": source}
    except WorkspaceError as exc:
        choice = {"engine": None, "source": str(exc)}
    unreadable = health.survey(owned_records())
    from manager.commands import doctor_confine

    hidden, network = doctor_confine.report(ctx, choice["engine"])
    if args.json:
        ui.dump_json({"engines": {n: [c.as_json() for c in cs] for n, cs in results.items()},
                      "chosen": choice, "unreadable": [u.as_json() for u in unreadable],
                      "hide": hidden, "network": network})
    else:
        _show(results, choice)
        _show_unreadable(unreadable)
        doctor_confine.show(hidden, network)
    return 0 if choice["engine"] and not unreadable and not doctor_confine.failed(hidden, network) else 1


def _show_unreadable(found: list[health.Unreadable]) -> None:
    if not found:
        return
    ui.out(ui.paint(f"sessions whose state this workspace cannot read: {len(found)}", "bold"))
    for item in found:
        ui.out(f"  {ui.paint('FAIL', 'red')} {item.session}: {item.problem}")
        ui.out(f"       fix: {item.fix}")


def _checks(name: str, ctx: Context) -> list[Check]:
    try:
        return list(registry.make(name, ctx.config).checks())
    except WorkspaceError as exc:
        return [Check("load", False, str(exc), "see the message")]


def _show(results: dict[str, list[Check]], choice: dict[str, str | None]) -> None:
    for name, checks in results.items():
        works = all(c.ok for c in checks)
        limited = works and any(c.warn for c in checks)
        state = "works, with limits" if limited else "works" if works else "not available"
        ui.out(ui.paint(f"{name}: {state}", "bold"))
        for check in checks:
            mark = ui.paint("FAIL", "red") if not check.ok else \
                ui.paint("warn", "yellow") if check.warn else ui.paint("ok  ", "green")
            ui.out(f"  {mark} {check.name}" + (f": {check.detail}" if check.detail else ""))
            if (not check.ok or check.warn) and check.fix:
                ui.out(f"       fix: {check.fix}")
    if choice["engine"]:
        ui.out(f"engine in use: {choice['engine']} ({choice['source']})")
    else:
        ui.out(ui.paint(f"no engine works here: {choice['source']}", "red"))
