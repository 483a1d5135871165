"""UserPromptSubmit, Stop and SubagentStop: handed to the guard rails.

The diff budget and checkpoints live in :mod:`manager.guardrails.actions`; these hooks
hand it the payload with the workspace session id. The plugin adds one thing
of its own: ``/workspace:passthrough`` typed by the user arms the one-shot
bypass, so only the user, never the model, can let a call out of the sandbox.
"""

from __future__ import annotations

from manager.claude import protocol
from manager.claude import state
from manager.session import paths

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from typing import Any

    from manager.guardrails.actions import Event
    from manager.guardrails.actions import Outcome

PASSTHROUGH_COMMAND = "/workspace:passthrough"


def prompt(payload: dict[str, Any]) -> dict[str, Any]:
    ours = None
    text = payload.get("prompt")
    claude_id = payload.get("session_id")
    if isinstance(text, str) and text.strip().startswith(PASSTHROUGH_COMMAND) \
            and paths.valid_id(claude_id):
        session_id = state.resolve_session(str(claude_id))
        if state.read_hot(session_id) is not None:
            state.arm_bypass(session_id)
            ours = "workspace: the user allowed the next Bash call to run outside the sandbox, once."
    theirs = outcome_for("on_prompt", payload)
    context = "\n".join(filter(None, [theirs.context, ours]))
    return protocol.answer("UserPromptSubmit", theirs.notice, context, theirs.block)


def stop(payload: dict[str, Any]) -> dict[str, Any]:
    return _answer("Stop", outcome_for("on_stop", payload))


def subagent_stop(payload: dict[str, Any]) -> dict[str, Any]:
    return _answer("SubagentStop", outcome_for("on_stop", payload, subagent=True))


def outcome_for(action: str, payload: dict[str, Any], **flags: bool) -> Outcome:
    """The guard rails' ``action`` on the event this hook input describes."""
    from manager.guardrails import actions  # lazy: git plumbing is not needed on every hook

    event = guard_event(workspace_payload(payload)) if isinstance(payload, dict) else None
    if event is None:
        return actions.NO_SESSION
    found: Outcome = getattr(actions, action)(event, **flags)
    return found


def guard_event(payload: dict[str, Any]) -> Event | None:
    """The hook input as the guard rails read it (typed; None without a session id)."""
    session_id, cwd, agent = (payload.get(k) for k in ("session_id", "cwd", "agent_id"))
    if not isinstance(session_id, str) or not session_id:
        return None
    from manager.guardrails.actions import Event

    return Event(session_id, cwd if isinstance(cwd, str) else None,
                               payload.get("stop_hook_active") is True,
                               agent if isinstance(agent, str) and agent else None)


def _answer(event: str, outcome: Outcome) -> dict[str, Any]:
    return protocol.answer(event, outcome.notice, outcome.context, outcome.block)


def workspace_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload with Claude's session id replaced by the workspace session it continues.

    After /clear, compaction or a fork Claude brings a new id that SessionStart
    adopted as an alias: the guard rails must see the adopted session's
    baseline, checkpoints and sandbox, not start afresh without the overlay.
    """
    claude_id = payload.get("session_id")
    if not paths.valid_id(claude_id):
        return payload
    return {**payload, "session_id": state.resolve_session(claude_id)}
