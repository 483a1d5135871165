"""SessionStart and SessionEnd, and setting a session up for the hot path.

SessionStart is idempotent for every ``source``: ``startup`` and ``resume`` find
or create the session named by Claude's session id; ``clear``, ``compact`` and
``fork`` may bring a new id that continues the project's current Claude
session, which is then adopted (an alias) so no overlay with work in it is
orphaned. SessionEnd releases what the session holds and keeps its changes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from manager.claude import hotconfig
from manager.claude import protocol
from manager.claude import rewrite
from manager.claude import state
from manager.session import paths
from manager.session.paths import enable_site

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from typing import Any

    from manager.claude.records import Hot

PENDING_SHOWN = 5


def _project(payload: dict[str, Any]) -> str:
    return os.environ.get("CLAUDE_PROJECT_DIR") or str(payload.get("cwd") or os.getcwd())


def _client() -> tuple[int | None, int | None]:
    from manager.session import lifecycle

    pid = os.environ.get("CLAUDE_PID", "")
    if not pid.isdigit():
        return None, None
    return int(pid), lifecycle.process_start(int(pid))


def ensure(session_id: str, payload: dict[str, Any]) -> Hot:
    """The session's hot state, creating the session and the state when missing."""
    enable_site()
    from manager.session import store
    from manager.session.context import Context

    ctx = Context.load(_project(payload))
    session = ctx.open_or_create(session_id, origin="claude")
    _record_client(session)
    hot = build_hot(ctx, session)
    state.write_hot(session.id, hot)
    store.save(session)
    return hot


def _record_client(session: Any) -> None:
    pid, start = _client()
    if pid is not None and (session.client_pid, session.client_start) != (pid, start):
        session.client_pid, session.client_start = pid, start


def build_hot(ctx: Any, session: Any) -> Hot:
    engine = ctx.engine(session)
    entry, entry_bg = _templates(engine, session)
    return {"session": session.id, "project": session.project, "engine": session.engine,
            "entry": entry, "entry_bg": entry_bg,
            "layers": [[str(layer.upper), str(layer.target)] for layer in engine.layers(session)],
            "config": hotconfig.pick(ctx.config, session.project),
            "config_stamp": hotconfig.stamp(session.project)}


def _templates(engine: Any, session: Any) -> tuple[list[str] | None, list[str] | None]:
    """The engine's entry argv with placeholders, when it passes them as whole arguments."""
    from manager.engines.base import RunRequest

    found = []
    for cwd_out in (Path(rewrite.CWD_OUT), None):
        request = RunRequest(command=rewrite.COMMAND, cwd=rewrite.CWD, cwd_out=cwd_out)
        argv = [str(a) for a in engine.entry_argv(session, request)]
        wanted = [rewrite.COMMAND, rewrite.CWD] + ([rewrite.CWD_OUT] if cwd_out else [])
        whole = all(argv.count(p) == 1 for p in wanted)
        embedded = any(p in a and a != p for a in argv for p in wanted)
        found.append(argv if whole and not embedded else None)
    return found[0], found[1]


def entry_argv(session_id: str, command: str, cwd: str, cwd_out: str) -> list[str]:
    """The slow way, for engines whose entry cannot be templated: ask the engine per call."""
    enable_site()
    from manager.engines.base import RunRequest
    from manager.session import store
    from manager.session.context import Context

    session = store.load(session_id)
    ctx = Context.load(session.project)
    request = RunRequest(command=command, cwd=cwd, cwd_out=Path(cwd_out) if cwd_out else None)
    return [str(a) for a in ctx.engine(session).entry_argv(session, request)]


def run_in_sandbox(session_id: str, command: str, stdin_path: str) -> str | None:
    """Run ``command`` in the session's sandbox with the file ``stdin_path`` as its input,
    through :func:`manager.session.sandbox.run`; None when it worked, else why not."""
    enable_site()
    import subprocess
    import tempfile

    from manager.engines.base import RunRequest
    from manager.errors import WorkspaceError
    from manager.session import sandbox
    from manager.session import store
    from manager.session.context import Context

    try:
        session = store.load(session_id)
        ctx = Context.load(session.project)
        with open(stdin_path, "rb") as stdin, tempfile.TemporaryFile() as stderr:
            request = RunRequest(command=command, cwd="/", timeout=60, stdin=stdin,
                                 stdout=subprocess.DEVNULL, stderr=stderr)
            status = sandbox.run(ctx, session, request)
            stderr.seek(0)
            why = stderr.read().decode(errors="replace").strip()
    except (OSError, WorkspaceError) as exc:
        return str(exc)
    return None if status == 0 else why or f"exit {status}"


# -- SessionStart ------------------------------------------------------------------


def session_start(payload: dict[str, Any]) -> dict[str, Any]:
    claude_id = protocol.field(payload, "session_id")
    if not paths.valid_id(claude_id):
        raise protocol.HookInputError(f"unusable session_id {claude_id!r}")
    source = str(payload.get("source") or "startup")
    session_id = _adopt(claude_id, source, payload)
    ensure(session_id, payload)
    _guardrails_start({**payload, "session_id": session_id})
    answer = protocol.context("SessionStart", _start_context(session_id, source))
    note = untrusted_note(_project(payload))
    return dict(answer, systemMessage=note) if note else answer


def untrusted_note(project: str) -> str | None:
    """Tell the user which of the project file's settings wait for their trust."""
    from manager import config

    try:
        ignored = config.load(Path(project)).ignored
    except Exception:  # noqa: BLE001 - the note is a courtesy; ensure() reports bad config
        return None
    if not ignored:
        return None
    return (f"workspace: {config.PROJECT_FILE} sets {', '.join(sorted(ignored))}, ignored until "
            "you trust the file: read it, then run `workspace config trust` in the project")


def _adopt(claude_id: str, source: str, payload: dict[str, Any]) -> str:
    """A new id after /clear, compaction or a fork continues the project's current session."""
    enable_site()
    from manager.session import lifecycle
    from manager.session import store

    session_id = state.resolve_session(claude_id)
    if store.exists(session_id) or source not in ("clear", "compact", "fork"):
        return session_id
    current = store.current(Path(_project(payload)).resolve())
    if current is None or current.origin != "claude":
        return session_id
    same_client = current.client_pid is not None and _client()[0] == current.client_pid
    if same_client or lifecycle.client_alive(current) is not True:
        state.set_alias(claude_id, current.id)
        return current.id
    return session_id


def _guardrails_start(payload: dict[str, Any]) -> None:
    from manager.claude.guard import guard_event
    from manager.guardrails import actions  # lazy: git plumbing is not needed on every hook

    event = guard_event(payload)
    if event is not None:
        actions.on_session_start(event)


def _start_context(session_id: str, source: str) -> str:
    text = ("workspace: Bash commands in this session run in a copy-on-write sandbox "
            f"(session {session_id}); their file changes are held for the user's review and "
            "reach the real filesystem only when the user commits them. "
            "Edit/Write tool edits go to the real files.")
    if source in ("resume", "compact", "clear", "fork"):
        text += " " + pending_summary(session_id)
    return text


def pending_summary(session_id: str) -> str:
    from manager.changes.display import display_path
    from manager.session import store
    from manager.session.context import Context
    from manager.session.sandbox import pending

    session = store.load(session_id)
    ctx = Context.load(session.project)
    found = pending(ctx, session)
    if not found:
        return "Nothing is pending in the sandbox."
    shown = ", ".join(display_path(c, session.project_path) for c in found[:PENDING_SHOWN])
    more = f" and {len(found) - PENDING_SHOWN} more" if len(found) > PENDING_SHOWN else ""
    are = "change is" if len(found) == 1 else "changes are"
    return (f"{len(found):,} {are} pending in the sandbox, not yet on the real "
            f"filesystem: {shown}{more}. Commands keep seeing them; the user reviews with "
            "/workspace:status and /workspace:diff and applies with /workspace:commit.")


# -- SessionEnd --------------------------------------------------------------------


def session_end(payload: dict[str, Any]) -> dict[str, Any]:
    claude_id = protocol.field(payload, "session_id")
    if not paths.valid_id(claude_id):
        return {}
    enable_site()
    from manager.errors import WorkspaceError
    from manager.session import store
    from manager.session.context import Context

    session_id = state.resolve_session(claude_id)
    if not store.exists(session_id):
        return {}
    session = store.load(session_id)
    # Still busy: the holder's idle exit and `workspace gc` take over.
    with contextlib.suppress(WorkspaceError):
        Context.load(session.project).engine(session).release(session)
    shutil.rmtree(os.path.join(paths.session_root(session_id), state.CALLS), ignore_errors=True)
    return {}
