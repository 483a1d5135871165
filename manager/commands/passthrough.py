"""``workspace passthrough``: let the session's next Bash call run outside the sandbox, once.

Only the user may do this. Run from a Bash call Claude made (``CLAUDECODE`` is
set), it refuses unless ``plugin.allow_model_bypass`` is on; the slash command
``/workspace:passthrough`` arms it from the user's prompt instead (the
UserPromptSubmit hook) and shows the state with ``--status``.
"""

from __future__ import annotations

import argparse
import os

from manager import ui
from manager.claude import state
from manager.commands.common import session_args
from manager.errors import WorkspaceError
from manager.session import paths
from manager.session.context import Context


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("passthrough", help="run the next Claude Bash call unsandboxed, once")
    session_args(p)
    group = p.add_mutually_exclusive_group()
    group.add_argument("--status", action="store_true", help="only say whether it is armed")
    group.add_argument("--cancel", action="store_true", help="disarm it")
    p.set_defaults(func=passthrough)


def _claude_session() -> str | None:
    """Inside a Claude Code session (a slash command): that session's sandbox."""
    claude_id = os.environ.get("CLAUDE_CODE_SESSION_ID")
    return state.resolve_session(claude_id) if paths.valid_id(claude_id) else None


def passthrough(args: argparse.Namespace) -> int:
    ctx = Context.load(args.project)
    session = ctx.session(args.session or _claude_session())
    if args.cancel:
        state.take_bypass(session.id)
    elif not args.status:
        if os.environ.get("CLAUDECODE") and not ctx.config["plugin.allow_model_bypass"]:
            raise WorkspaceError(
                "refusing: Claude cannot switch its own sandbox off",
                hint="type /workspace:passthrough in Claude Code yourself, or set "
                     "plugin.allow_model_bypass: true")
        state.arm_bypass(session.id)
    armed = state.bypass_armed(session.id)
    ui.out(f"session {session.id}: the next Bash call runs "
           f"{'OUTSIDE the sandbox (once)' if armed else 'in the sandbox'}")
    return 0
