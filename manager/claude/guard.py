"""UserPromptSubmit, Stop and SubagentStop: handed to the guard rails.

The diff budget and checkpoints live in :mod:`manager.guardrails.actions`; these hooks
hand it the payload with the workspace session id. The plugin adds one thing
of its own: ``/workspace:passthrough`` typed by the user arms the one-shot
bypass, so only the user, never the model, can let a call out of the sandbox.
"""

from __future__ import annotations

from manager.claude import protocol
from manager.claude import state

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from typing import Any

PASSTHROUGH_COMMAND = "/workspace:passthrough"


def _guardrails() -> Any:
    from manager.guardrails import actions  # lazy: git plumbing is not needed on every hook

    return actions


def prompt(payload: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = {}
    text = payload.get("prompt")
    claude_id = payload.get("session_id")
    if isinstance(text, str) and text.strip().startswith(PASSTHROUGH_COMMAND) \
            and state.valid_id(claude_id):
        session_id = state.resolve_session(str(claude_id))
        if state.read_hot(session_id) is not None:
            state.arm_bypass(session_id)
            answer = protocol.context(
                "UserPromptSubmit", "workspace: the user allowed the next Bash call to run "
                "outside the sandbox, once.")
    return _merge(answer, _guardrails().on_prompt(workspace_payload(payload)) or {})


def stop(payload: dict[str, Any]) -> dict[str, Any]:
    return _guardrails().on_stop(workspace_payload(payload)) or {}


def subagent_stop(payload: dict[str, Any]) -> dict[str, Any]:
    return _guardrails().on_stop(workspace_payload(payload), subagent=True) or {}


def workspace_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload with Claude's session id replaced by the workspace session it continues.

    After /clear, compaction or a fork Claude brings a new id that SessionStart
    adopted as an alias: the guard rails must see the adopted session's
    baseline, checkpoints and sandbox, not start afresh without the overlay.
    """
    claude_id = payload.get("session_id")
    if not state.valid_id(claude_id):
        return payload
    return {**payload, "session_id": state.resolve_session(claude_id)}


def _merge(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    if not ours:
        return theirs
    merged = dict(theirs)
    spec = dict(merged.get("hookSpecificOutput") or {"hookEventName": "UserPromptSubmit"})
    extra = ours["hookSpecificOutput"]["additionalContext"]
    spec["additionalContext"] = "\n".join(filter(None, [spec.get("additionalContext"), extra]))
    merged["hookSpecificOutput"] = spec
    return merged
