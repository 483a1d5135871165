"""``workspace image``: build the container engines' sandbox image, or show its state."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from manager import ui
from manager.commands.common import json_arg
from manager.engines import registry
from manager.engines.container import probe as container_probe
from manager.errors import WorkspaceError
from manager.session.context import Context

ENGINES = tuple(sorted(registry.CONTAINER_ENGINES))
# The image definition is package data: an installed copy builds the image as a checkout does.
IMAGES_DIR = Path(__file__).resolve().parents[1] / "images"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("image", help="build or inspect the podman/docker sandbox image")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    build = verbs.add_parser("build", help="build the image locally (mmdebstrap; no registry)",
                             description="Build workspace-sandbox:latest for docker and/or "
                                         "podman (rootless too) from a Debian rootfs made by "
                                         "mmdebstrap, as an ordinary user in a user namespace "
                                         "(needs uidmap and subordinate ids); later runs reuse "
                                         "the cached rootfs.")
    build.add_argument("--engine", choices=(*ENGINES, "all"),
                       help="the engine(s) to build for (default: the configured engine when "
                            "it is podman or docker, else every container engine that answers "
                            "here)")
    build.add_argument("--project", metavar="DIR", help="project directory (for its engine "
                                                        "setting)")
    build.add_argument("--force", action="store_true", help="rebuild even when up to date")
    build.add_argument("--mirror", metavar="URL", help="Debian mirror for the bootstrap")
    build.add_argument("--rootfs", metavar="TAR", help="use this rootfs tarball (from "
                                                       "`build.sh --print-rootfs`)")
    build.set_defaults(func=build_image)
    status = verbs.add_parser("status", help="is the sandbox image present in each engine")
    status.add_argument("--project", metavar="DIR", help="project directory")
    json_arg(status)
    status.set_defaults(func=image_status)


def build_image(args: argparse.Namespace) -> int:
    script = IMAGES_DIR / "build.sh"
    if not script.is_file():
        raise WorkspaceError(f"{script} not found: this copy of workspace is incomplete",
                             hint="reinstall workspace")
    argv = ["bash", str(script), "--engine", args.engine or _default_engines(args.project)]
    argv += ["--force"] if args.force else []
    argv += ["--mirror", args.mirror] if args.mirror else []
    argv += ["--rootfs", args.rootfs] if args.rootfs else []
    rc = subprocess.call(argv)
    if rc != 0:
        raise WorkspaceError(f"image build failed (exit {rc}); its output is above")
    return 0


def _default_engines(project: str | None) -> str:
    """The configured container engine, or those that answer this user: building for an
    engine the user cannot reach (docker's socket, for a podman user) only fails."""
    configured = Context.load(project).config["engine"]
    if configured in ENGINES:
        return str(configured)
    answers = {cli: container_probe.daemon_version(cli) for cli in ENGINES}
    reachable = [cli for cli, (ok, _) in answers.items() if ok]
    if not reachable:
        why = "; ".join(f"{cli}: {text}" for cli, (_, text) in answers.items())
        raise WorkspaceError(f"no container engine answers here ({why})",
                             hint="start podman or docker, or name one with --engine")
    return reachable[0] if len(reachable) == 1 else "all"


def image_status(args: argparse.Namespace) -> int:
    image = Context.load(args.project).config["container.image"]
    states = {cli: container_probe.quick_reason(cli, image) for cli in ENGINES}
    if args.json:
        ui.dump_json({"image": image, "engines": {cli: {"ok": reason is None, "reason": reason}
                                                  for cli, reason in states.items()}})
    else:
        for cli, reason in states.items():
            ui.out(f"{cli}: {image} present" if reason is None else f"{cli}: {reason}")
    return 0 if any(reason is None for reason in states.values()) else 1
