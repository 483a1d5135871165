"""``workspace config``: the merged configuration and where each value came from;
``workspace config trust``: let the project's ``.workspace.yaml`` set the settings
that weaken the sandbox (see :mod:`manager.config`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from manager import ui
from manager.commands.common import json_arg
from manager.config import PROJECT_FILE
from manager.config import SCHEMA
from manager.config import TRUST_REQUIRED
from manager.config import env_name
from manager.session.context import Context


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("config", help="show the merged configuration and its sources")
    p.add_argument("--project", metavar="DIR", help="project directory (default: from the cwd)")
    p.add_argument("action", nargs="?", choices=("show", "trust", "untrust"), default="show",
                   help="trust: let the project's .workspace.yaml, as it is now, set "
                        f"{', '.join(sorted(TRUST_REQUIRED))}, and its "
                        ".devcontainer/devcontainer.json name the container image; "
                        "untrust: stop that")
    json_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "show":
        return show(args)
    return trust(args, args.action == "trust")


def show(args: argparse.Namespace) -> int:
    ctx = Context.load(args.project)
    if args.json:
        data = {key: {"value": ctx.config[key], "source": ctx.config.sources[key]}
                for key in SCHEMA}
        for key, why in ctx.config.ignored.items():
            data[key]["ignored"] = why
        dev = _devcontainer(ctx)
        if dev is not None:
            data["container.image"]["devcontainer"] = {"path": str(dev[0]), "trusted": dev[1]}
        ui.dump_json(data)
        return 0
    for key, option in SCHEMA.items():
        value = json.dumps(ctx.config[key])
        source = ctx.config.sources[key]
        ui.out(f"{key} = {value}  {ui.paint(f'# {source}; {option.help}; env {env_name(key)}', 'dim')}")
    for key, why in ctx.config.ignored.items():
        ui.out(f"{key}: the project's value is ignored: {why}")
    dev = _devcontainer(ctx)
    if dev is not None:
        ui.out(f"container.image: {dev[0]} names the image" if dev[1] else
               f"container.image: {dev[0]} is ignored: not trusted (`workspace config trust` "
               "after reading it)")
    return 0


def _devcontainer(ctx: Context) -> tuple[Path, bool] | None:
    """(the project's devcontainer, trusted) when it would choose the image."""
    from manager.config import is_trusted_digest
    from manager.engines.container import image as container_image
    from manager.errors import WorkspaceError

    path = None if container_image.explicit(ctx.config) else container_image.find(ctx.project)
    if path is None:
        return None
    try:
        digest = container_image.load(path).digest()
    except WorkspaceError:
        return path, False
    return path, is_trusted_digest(path, digest)


def trust(args: argparse.Namespace, trusted: bool) -> int:
    ctx = Context.load(args.project)
    found = _trust_settings(ctx.project, trusted)
    found = _trust_devcontainer(ctx.project, trusted) or found
    if trusted and not found:
        ui.out(f"{ctx.project / PROJECT_FILE} does not exist: nothing to trust")
        return 1
    return 0


def _trust_settings(project: Path, trusted: bool) -> bool:
    from manager.config import set_trust

    path = project / PROJECT_FILE
    if not path.exists():
        set_trust(path, False)
        return False
    if trusted:
        ui.out(path.read_text(encoding="utf-8").rstrip("\n"))
    digest = set_trust(path, trusted)
    if digest:
        ui.out(f"trusted {path} (sha256 {digest[:12]}…): it may now set "
               f"{', '.join(sorted(TRUST_REQUIRED))}. Any change to it needs trusting again.")
    else:
        ui.out(f"{path} is no longer trusted")
    return True


def _trust_devcontainer(project: Path, trusted: bool) -> bool:
    """The devcontainer names the image every call runs in: trusted with its Dockerfile."""
    from manager.engines.container import image as container_image
    path = container_image.find(project)
    if path is None:
        return False
    if trusted:
        spec = container_image.load(path)
        for shown in (path, spec.dockerfile):
            if shown is not None and shown.is_file():
                ui.out(f"--- {shown}")
                ui.out(shown.read_text(encoding="utf-8", errors="replace").rstrip("\n"))
    result = container_image.trust(project, trusted)
    digest = result[1] if result else None
    if digest:
        ui.out(f"trusted {path} (sha256 {digest[:12]}…): container sessions without "
               "container.image run in the image it names. Any change to it or its "
               "Dockerfile needs trusting again.")
    else:
        ui.out(f"{path} is no longer trusted")
    return True
