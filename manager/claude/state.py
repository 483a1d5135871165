"""What the hooks keep per session, read on the hot path with ``os`` alone.

Beside the session record (:mod:`manager.session.store`) each Claude session has:

    sessions/<id>/claude.json    the plugin's hot state: the engine's entry argv as a
                                 template, its layers, the settings the rewriter needs
                                 and the stamps of the files they came from
    sessions/<id>/claude-cwd     "<sandbox cwd>\\0<client cwd>\\0" after the last call
                                 that exited 0 (written by finish.sh)
    sessions/<id>/bypass-next    present: the next Bash call runs unsandboxed once
    sessions/<id>/calls/<tool_use_id>.cmd / .cwd
                                 the command we emitted (PostToolUse compares), and
                                 the sandbox's final cwd of a call (both removed by
                                 PostToolUse; a failed call fires none: SessionEnd)
    claude-alias/<claude id>     the workspace session a new Claude session id
                                 continues (after /clear, fork)

``pathlib``, ``dataclasses`` and the store are not imported here: each costs
milliseconds that every Bash call would pay.
"""

from __future__ import annotations

import os

from manager import fastjson
from manager.session import paths

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from typing import Any

    from manager.claude.records import Hot

HOT = "claude.json"
CWD = "claude-cwd"
BYPASS = "bypass-next"
CALLS = "calls"
ALIASES = "claude-alias"
# The code that built a hot state: its entry templates name this code's scripts, so a
# plugin updated under a running session rebuilds them on its first call.
CODE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def resolve_session(claude_id: str) -> str:
    """The workspace session id for a Claude session id (itself unless aliased)."""
    try:
        with open(os.path.join(paths.state_root(), ALIASES, claude_id), encoding="utf-8") as f:
            target = f.read().strip()
    except FileNotFoundError:
        return claude_id
    return target if paths.valid_id(target) else claude_id


def read_hot(session_id: str) -> Hot | None:
    """The plugin's hot state of a session, or None when it is to be (re)built.

    It is derived from the session record and the configuration, so one that is
    unreadable or was built by other code is rebuilt; one in a newer format is
    an error (:class:`manager.versioning.NewerFormat`), never overwritten.
    """
    from manager import versioning

    path = os.path.join(paths.session_root(session_id), HOT)
    try:
        with open(path, encoding="utf-8") as f:
            data: Any = fastjson.loads(f.read())
    except (FileNotFoundError, ValueError):
        return None
    versioning.check("claude", data, path)
    ours = isinstance(data, dict) and data.get("code") == [CODE, versioning.RELEASE]
    hot: Hot | None = data if ours else None     # what write_hot wrote, by this code
    return hot


def write_hot(session_id: str, data: Hot) -> None:
    import json
    from pathlib import Path

    from manager import versioning
    from manager.fs.util import write_atomic

    read_hot(session_id)    # one in a newer format is not ours to overwrite: raises
    record = versioning.stamp("claude", dict(data, code=[CODE, versioning.RELEASE]))
    write_atomic(Path(paths.session_root(session_id)) / HOT, json.dumps(record, indent=1).encode())


def read_cwd(session_id: str) -> tuple[str, str] | None:
    """(sandbox cwd, the client cwd it left) after the last successful call."""
    try:
        with open(os.path.join(paths.session_root(session_id), CWD), encoding="utf-8",
                  errors="surrogateescape") as f:
            fields = f.read().split("\0")
    except FileNotFoundError:
        return None
    if len(fields) < 2 or not fields[0].startswith("/") or not fields[1].startswith("/"):
        return None      # empty while finish.sh rewrites it, or never written
    return fields[0], fields[1]


def take_bypass(session_id: str) -> bool:
    """Consume the one-shot bypass: True for exactly one caller."""
    try:
        os.unlink(os.path.join(paths.session_root(session_id), BYPASS))
    except FileNotFoundError:
        return False
    return True


def arm_bypass(session_id: str) -> None:
    path = os.path.join(paths.session_root(session_id), BYPASS)
    with open(path, "w", encoding="utf-8") as f:
        f.write("next Bash call runs unsandboxed\n")


def bypass_armed(session_id: str) -> bool:
    return os.path.exists(os.path.join(paths.session_root(session_id), BYPASS))


def call_path(session_id: str, tool_use_id: str, suffix: str) -> str:
    return os.path.join(paths.session_root(session_id), CALLS, f"{tool_use_id}.{suffix}")


def record_call(session_id: str, tool_use_id: str, command: str) -> None:
    path = call_path(session_id, tool_use_id, "cmd")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(command)


def pop_call(session_id: str, tool_use_id: str) -> str | None:
    """The command emitted for a call (then forgotten, with its report of the final
    directory, which finish.sh read and left), or None when none was."""
    path = call_path(session_id, tool_use_id, "cmd")
    try:
        with open(path, encoding="utf-8", errors="surrogatepass") as f:
            command = f.read()
    except FileNotFoundError:
        return None
    os.unlink(path)
    try:  # noqa: SIM105 - importing contextlib costs the hook's start-up
        os.unlink(call_path(session_id, tool_use_id, "cwd"))
    except FileNotFoundError:
        pass
    return command


def set_alias(claude_id: str, session_id: str) -> None:
    from pathlib import Path

    from manager.fs.util import write_atomic

    root = Path(paths.state_root()) / ALIASES
    root.mkdir(parents=True, exist_ok=True)
    write_atomic(root / claude_id, session_id.encode() + b"\n")
