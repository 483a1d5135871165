"""Arguments shared by several commands."""

from __future__ import annotations

import argparse

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs every command ~3 ms
if TYPE_CHECKING:
    from manager.guardrails.target import Target
    from manager.session.context import Context
    from manager.session.health import Record
    from manager.session.store import Session


def session_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--session", metavar="ID", help="session id (default: the project's current one)")
    parser.add_argument("--project", metavar="DIR", help="project directory (default: from the cwd)")


def never_committed(ctx: Context, kept: list[str] | None = None) -> list[str]:
    """The user's exclude patterns, and, as spelled (``Literal``: the very paths review
    leaves out), workspace's own state and what is hidden (``sandbox.reviewable``);
    ``kept``: ``sandbox.kept_out``, when the caller has it (it resolves ``hide``'s globs)."""
    from manager.commit.exclude import Literal
    from manager.session.sandbox import kept_out

    return [*ctx.config["exclude"], *map(Literal, kept_out(ctx) if kept is None else kept)]


def review_context(project: str | None) -> Context:
    """The context for review, commit and discard: the project's settings file is the
    agent's to write, so what in it cannot be read is skipped with a warning, never an
    error that would block the user's review or commit."""
    from manager import ui
    from manager.session.context import Context

    ctx = Context.load(project, lenient=True)
    for problem in ctx.config.skipped:
        ui.err(ui.paint(f"warning: {ui.shown(problem)}", "yellow"))
    return ctx


def still_running(ctx: Context, session: Session) -> tuple[list[str], str | None]:
    """What of the session's calls runs now (a background call, what a call left in a
    container), and the note a review says with it: their next writes are not in it."""
    found = ctx.engine(session).running(session)
    if not found:
        return [], None
    return found, (f"calls of this session are still running ({', '.join(found[:8])}"
                   f"{', ...' if len(found) > 8 else ''}): what they write next is not shown here; "
                   "review again when they have ended, before you commit")


def json_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def pager_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-pager", action="store_true",
                        help="never page long output (default: a pager on a terminal, as git)")


def said_guard_rails_off(target: Target, as_json: bool) -> bool:
    """Outside git the diff budget and checkpoints are off: say so (in JSON with --json)
    and return True; else say nothing and return False."""
    if target.shadow is not None:
        return False
    from manager import ui
    from manager.guardrails.target import not_in_git

    if as_json:
        ui.dump_json({"session": target.session_id, "enabled": False})
    else:
        ui.out(not_in_git(target))
    return True


def owned_records() -> list[Record]:
    """The session records other packages own, for ``doctor`` and ``gc`` to check they can
    be read (:mod:`manager.session.health` cannot import their owners: they sit above it)."""
    from manager.commit import journal
    from manager.guardrails import state as guardstate
    from manager.session import store
    from manager.session.health import Record

    return [Record(lambda sid: journal.path_for(store.session_dir(sid)),
                   lambda sid: journal.read(store.session_dir(sid))),
            Record(guardstate.side_file, guardstate.read_side, guardstate.session_ids)]
