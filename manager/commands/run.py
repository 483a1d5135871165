"""``workspace run``: run a command inside the session's sandbox."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import shlex
from pathlib import Path

from manager import ui
from manager.commands import run_lean
from manager.commands.common import session_args
from manager.engines import registry
from manager.engines.base import RunRequest
from manager.errors import WorkspaceError
from manager.session import sandbox
from manager.session import store
from manager.session.context import Context
from manager.session.context import find_project
from manager.session.store import Session

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.record
if TYPE_CHECKING:
    from typing import Any

    from manager.engines.base import Engine

SANDBOX_FAILED = 125  # as the per-call entries: the command did not run


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="run a command in the sandbox",
                       description="Run CMD in the project's current session (created when "
                                   "there is none); its side effects stay in the overlay.")
    session_args(p)
    p.add_argument("--new", action="store_true", help="start a new session for the project")
    p.add_argument("--engine", help=f"engine for a new session ({', '.join(registry.CHOICES)})")
    p.add_argument("--cwd", help="working directory inside the sandbox (default: the current one)")
    p.add_argument("--cwd-out", help="write the final working directory to this file")
    p.add_argument("--timeout", type=float, help="seconds; then the whole process tree is killed (exit 124)")
    p.add_argument("-c", dest="script", metavar="SCRIPT", help="a bash script, as with `bash -c`")
    p.add_argument("argv", nargs=argparse.REMAINDER, help="-- CMD [ARG...]")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    command = _command(args)
    # A failure here means the command did not run: the sandbox's own, told apart from the
    # command's statuses by 125 (the per-call entries say the same).
    try:
        return _run(args, command)
    except WorkspaceError as exc:
        ui.err(f"workspace: error: {exc}")
    except OSError as exc:  # e.g. an unusable state directory
        ui.err(f"workspace: error: the sandbox could not be prepared: {exc}\n"
               "hint: run `workspace doctor`")
    return SANDBOX_FAILED


def _run(args: argparse.Namespace, command: str) -> int:
    project = Path(args.project).resolve() if args.project else find_project(Path(os.getcwd()))
    # Read before the configuration: the key of the lean path's record (run_lean).
    key = _lean_key(str(project)) if args.engine is None else None
    ctx = Context.load(str(project), {"engine": args.engine})
    session = ctx.open_or_create(args.session, new=args.new)
    _state_engine_drift(ctx, session)
    request = RunRequest(command=command, cwd=os.path.abspath(args.cwd or os.getcwd()),
                         timeout=args.timeout,
                         cwd_out=Path(args.cwd_out) if args.cwd_out else None)
    quiet = session.extra.get("engine_drift_stated") is None   # no note the lean path must give
    remember = None
    if key is not None and quiet:
        remember = functools.partial(_remember, key, session)
    return sandbox.run(ctx, session, request, prepared=remember)


def _lean_key(project: str) -> dict[str, Any] | None:
    try:
        return run_lean.before_load(project)
    except (OSError, ValueError):   # the configuration's own reading says what is wrong
        return None


def _remember(key: dict[str, Any], session: Session, engine: Engine) -> None:
    """The lean path's record; it is a cache, so failing to write it changes nothing."""
    with contextlib.suppress(OSError, ValueError):
        run_lean.remember(key, session, engine)


def _state_engine_drift(ctx: Context, session: Session) -> None:
    """Say (once for each new disagreement; status says it every time) that the engine
    the configuration names is not the one this session runs."""
    drift = ctx.engine_drift(session)
    if session.extra.get("engine_drift_stated") == drift:
        return
    if drift is not None:
        ui.err(f"workspace: note: {drift}")
    session.extra["engine_drift_stated"] = drift
    store.save(session)


def _command(args: argparse.Namespace) -> str:
    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if args.script is not None and argv:
        raise WorkspaceError("give either -c SCRIPT or -- CMD..., not both")
    if args.script is not None:
        return str(args.script)
    if not argv:
        raise WorkspaceError("nothing to run", hint="workspace run -- CMD [ARG...]")
    return shlex.join(argv)
