"""One entry per hook event: ``python -m manager.claude EVENT`` with the payload on stdin.

Whatever happens, the process answers with exit status 0. A failure in
PreToolUse becomes a ``deny`` naming the fix (a crash would be Claude Code's
non-blocking path, which runs the command unsandboxed); a failure elsewhere
becomes a ``systemMessage`` for the user.
"""

from __future__ import annotations

import sys

from manager.claude import protocol

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from typing import Any

HANDLERS = {
    "PreToolUse": ("manager.claude.pretool", "handle"),
    "PostToolUse": ("manager.claude.posttool", "handle"),
    "SessionStart": ("manager.claude.sessions", "session_start"),
    "SessionEnd": ("manager.claude.sessions", "session_end"),
    "UserPromptSubmit": ("manager.claude.guard", "prompt"),
    "Stop": ("manager.claude.guard", "stop"),
    "SubagentStop": ("manager.claude.guard", "subagent_stop"),
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    event = args[0] if args else ""
    try:
        raw = sys.stdin.buffer.read()
    except OSError as exc:
        raw = b""
        protocol.emit(failure(event, exc))
        return 0
    try:
        answer = dispatch(event, raw)
    except BaseException as exc:  # noqa: BLE001 - fail closed, whatever it was
        answer = failure(event, exc)
    try:  # noqa: SIM105 - importing contextlib costs the hook's start-up
        protocol.emit(answer)
    except OSError:   # the client went away
        pass
    return 0


def dispatch(event: str, raw: bytes) -> dict[str, Any]:
    if event not in HANDLERS:
        raise protocol.HookInputError(f"unknown hook event {event!r}")
    payload = protocol.read_payload(raw)
    declared = payload.get("hook_event_name")
    if declared is not None and declared != event:
        raise protocol.HookInputError(f"hook for {event} received a {declared} payload")
    module_name, name = HANDLERS[event]
    module = __import__(module_name, fromlist=[name])
    result: dict[str, Any] = getattr(module, name)(payload)
    return result


def failure(event: str, exc: BaseException) -> dict[str, Any]:
    what = _describe(exc)
    if event == "PreToolUse":
        return protocol.deny(f"workspace could not sandbox this call, so it was not run: {what}. "
                             f"To fix: {protocol.DOCTOR}.")
    return protocol.answer(event, notice=f"workspace: the {event or 'hook'} hook failed: {what}. "
                                         f"{protocol.DOCTOR[0].upper()}{protocol.DOCTOR[1:]}.")


def _describe(exc: BaseException) -> str:
    from manager.errors import WorkspaceError

    if isinstance(exc, (protocol.HookInputError, WorkspaceError)):
        return str(exc).replace("\n", "; ")
    log = _crash_log(exc)
    return f"internal error {exc!r}" + (f" (details in {log})" if log else "")


def _crash_log(exc: BaseException) -> str | None:
    import os
    import traceback

    from manager.session import paths

    try:
        path = os.path.join(paths.state_root(), "hook-errors.log")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write("".join(traceback.format_exception(exc)) + "\n")
        return path
    except Exception:  # noqa: BLE001 - the log is a courtesy
        return None
