"""``workspace hooks install|uninstall|status``: the plugin's hooks in a settings file."""

from __future__ import annotations

import argparse
from pathlib import Path

from manager import ui
from manager.claude import install
from manager.commands.common import json_arg
from manager.session.context import find_project


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("hooks", help="install workspace's hooks into Claude Code settings",
                       description="For people who do not use the plugin system: merge the "
                                   "hooks into .claude/settings.json (or ~/.claude/settings.json "
                                   "with --global). Idempotent; other hooks are left intact.")
    p.add_argument("action", choices=("install", "uninstall", "status"))
    p.add_argument("--global", dest="global_", action="store_true",
                   help="the user's settings (~/.claude/settings.json) instead of the project's")
    p.add_argument("--project", metavar="DIR", help="project directory (default: from the cwd)")
    json_arg(p)
    p.set_defaults(func=hooks)


def hooks(args: argparse.Namespace) -> int:
    project = Path(args.project).resolve() if args.project else find_project(Path.cwd())
    if args.action == "status":
        return _status(project, args.json)
    path = install.settings_path(args.global_, project)
    if args.action == "install":
        changed = install.install(path)
        ui.out(f"{'installed' if changed else 'already installed'}: workspace hooks in {path}")
    else:
        changed = install.uninstall(path)
        ui.out(f"{'removed' if changed else 'nothing to remove'}: workspace hooks in {path}")
    return 0


def _status(project: Path, as_json: bool) -> int:
    rows = {scope: (str(path), install.status(path)) for scope, path in (
        ("project", install.settings_path(False, project)),
        ("user", install.settings_path(True, project)))}
    if as_json:
        ui.dump_json({scope: {"path": p, "state": s} for scope, (p, s) in rows.items()})
    else:
        for scope, (path, state) in rows.items():
            ui.out(f"{scope:<8} {state:<10} {path}")
    return 0
