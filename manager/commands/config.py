"""``workspace config``: the merged configuration and where each value came from."""

from __future__ import annotations

import argparse
import json

from manager import ui
from manager.commands.common import json_arg
from manager.config import SCHEMA
from manager.config import env_name
from manager.session.context import Context


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("config", help="show the merged configuration and its sources")
    p.add_argument("--project", metavar="DIR", help="project directory (default: from the cwd)")
    json_arg(p)
    p.set_defaults(func=show)


def show(args: argparse.Namespace) -> int:
    ctx = Context.load(args.project)
    if args.json:
        ui.dump_json({key: {"value": ctx.config[key], "source": ctx.config.sources[key]}
                      for key in SCHEMA})
        return 0
    for key, option in SCHEMA.items():
        value = json.dumps(ctx.config[key])
        source = ctx.config.sources[key]
        ui.out(f"{key} = {value}  {ui.paint(f'# {source}; {option.help}; env {env_name(key)}', 'dim')}")
    return 0
