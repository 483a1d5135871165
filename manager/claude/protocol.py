"""Claude Code's hook protocol: one JSON object in on stdin, one out on stdout.

Every answer leaves with exit status 0. Any other status except 2 is Claude
Code's *non-blocking* error path, where the tool call goes ahead as if the hook
were not there; for PreToolUse that would run a command unsandboxed.
"""

from __future__ import annotations

import sys

from manager import fastjson

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from typing import Any

DOCTOR = "run `workspace doctor` (or /workspace:doctor) to see what is wrong"


class HookInputError(Exception):
    """The hook's input is not what Claude Code sends."""


def read_payload(raw: str | bytes) -> dict[str, Any]:
    try:
        data = fastjson.loads(raw if isinstance(raw, str) else raw.decode())
    except ValueError as exc:
        raise HookInputError(f"hook input is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise HookInputError("hook input is not a JSON object")
    return data


def field(payload: dict[str, Any], name: str, kind: type = str) -> Any:
    value = payload.get(name)
    if not isinstance(value, kind):
        raise HookInputError(f"hook input field {name!r} is missing or not a {kind.__name__}")
    return value


def emit(answer: dict[str, Any]) -> None:
    if answer:
        sys.stdout.write(fastjson.dumps(answer))
    sys.stdout.flush()


def pre_tool(decision: str | None = None, reason: str | None = None,
             updated: dict[str, Any] | None = None, context: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"hookEventName": "PreToolUse"}
    if decision:
        spec["permissionDecision"] = decision
    if reason:
        spec["permissionDecisionReason"] = reason
    if updated is not None:
        spec["updatedInput"] = updated
    if context:
        spec["additionalContext"] = context
    return {"hookSpecificOutput": spec}


def deny(reason: str) -> dict[str, Any]:
    return pre_tool("deny", reason)


def context(event: str, text: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def answer(event: str, notice: str | None = None, context: str | None = None,
           block: str | None = None) -> dict[str, Any]:
    """A notice for the user (``systemMessage``), text for the model (``additionalContext``)
    and a refused stop (``decision: block`` with its reason), each only when given."""
    # Shown to the user in a terminal and read by the model: escaped like review's text.
    from manager.ui import shown

    notice, context, block = (shown(t, lines=True) if t else t for t in (notice, context, block))
    out: dict[str, Any] = {}
    if notice:
        out["systemMessage"] = notice
    if block:
        out["decision"], out["reason"] = "block", block
    if context:
        out["hookSpecificOutput"] = {"hookEventName": event, "additionalContext": context}
    return out
