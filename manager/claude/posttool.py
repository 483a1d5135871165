"""PostToolUse: check that what ran is what we emitted; sync direct writes.

Some client builds have ignored or overwritten ``updatedInput``. The client
hands PostToolUse the input that actually ran, so comparing it with the command
PreToolUse emitted (kept per ``tool_use_id``) tells at once when a command ran
that the sandbox did not see. The user gets a ``systemMessage``, Claude an
``additionalContext``. (A command that exits non-zero fires no PostToolUse.)
"""

from __future__ import annotations

from manager.claude import protocol
from manager.claude import state
from manager.session import paths

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from typing import Any

WARNING = ("workspace: WARNING: a Bash command ran outside the sandbox: Claude Code did not run "
           "the command the workspace hook gave it{detail}. Its side effects went straight to "
           "the real filesystem. Check the client version and `workspace hooks status`.")


def handle(payload: dict[str, Any]) -> dict[str, Any]:
    claude_id = payload.get("session_id")
    tool_input = payload.get("tool_input")
    if not paths.valid_id(claude_id) or not isinstance(tool_input, dict):
        return {}
    session_id = state.resolve_session(str(claude_id))
    if payload.get("tool_name") == "Bash":
        return _check_bash(payload, tool_input, session_id)
    if payload.get("tool_name") == "Write":
        return _sync_write(tool_input, session_id)
    return {}


def _check_bash(payload: dict[str, Any], tool_input: dict[str, Any],
                session_id: str) -> dict[str, Any]:
    call_id = payload.get("tool_use_id")
    emitted = state.pop_call(session_id, call_id) if paths.valid_id(call_id) else None
    ran = tool_input.get("command")
    if emitted is not None and emitted == ran:
        return {}
    detail = " (the hook never saw this call)" if emitted is None else ""
    return warn(WARNING.format(detail=detail))


def warn(text: str) -> dict[str, Any]:
    return protocol.answer("PostToolUse", notice=text, context=text)


def _sync_write(tool_input: dict[str, Any], session_id: str) -> dict[str, Any]:
    """A Write replaced a file the sandbox holds a copy of: give the sandbox the new content."""
    from manager.claude import edits
    from manager.claude import rewrite
    from manager.claude import sessions

    hot = state.read_hot(session_id)
    path = edits.target(tool_input)
    if hot is None or path is None or edits.sandbox_view(hot.get("layers") or [], path) is None:
        return {}
    parent = rewrite.quote(path.rsplit("/", 1)[0] or "/")
    command = f"mkdir -p -- {parent} && cat > {rewrite.quote(path)}"
    why = sessions.run_in_sandbox(session_id, command, path)
    if why is None:
        return {}
    return warn(f"workspace: the sandbox still shows the old {path} ({why}); Bash commands do "
                "not see this Write. Write it again through a Bash command.")
