"""Merge workspace's hooks into a Claude Code settings file, for use without the plugin.

The hooks are the plugin's own (``HOOKS`` is the one definition; hooks/hooks.json is
tested to be it): the same launcher (bin/workspace-hook, shipped in the package as
manager/claude/launcher), so the same resident service, deadline and deny on failure,
and the same ``onFailure: "block"`` on PreToolUse. The command names the launcher's
root and this interpreter, which the plugin's client would take from its environment.

Our entries are recognised by their command, so installing twice gives a
byte-identical file, uninstalling removes only ours (and those of older releases,
``-m manager.claude``), and every other hook and setting stays as it was. A file
that does not parse is refused and left untouched. Writes are atomic (temp file,
fsync, rename).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from manager.errors import WorkspaceError
from manager.fs.util import write_json_atomic

LEGACY_MARKER = "-m manager.claude"    # what releases before the launcher installed
MARKER = "/workspace-hook"
ROOT_VAR = "CLAUDE_PLUGIN_ROOT="
# (event, matcher or None, timeout in seconds, onFailure or None). The PreToolUse hooks
# block the call when the launcher itself fails or times out (docs/security.md).
HOOKS = (
    ("SessionStart", None, 60, None),
    ("UserPromptSubmit", None, 30, None),
    ("PreToolUse", "Bash", 60, "block"),
    ("PreToolUse", "Read|Edit|Write|MultiEdit|NotebookEdit", 60, "block"),
    ("PostToolUse", "Bash|Write", 60, None),
    ("Stop", None, 60, None),
    ("SubagentStop", None, 60, None),
    ("SessionEnd", None, 15, None),
)
PLUGIN_COMMAND = '"${CLAUDE_PLUGIN_ROOT}/bin/workspace-hook" '   # + the event


def settings_path(global_: bool, project: Path) -> Path:
    if global_:
        base = os.environ.get("CLAUDE_CONFIG_DIR")
        return Path(base) / "settings.json" if base else Path.home() / ".claude" / "settings.json"
    return project / ".claude" / "settings.json"


def hooks_for(command: Callable[[str], str]) -> dict[str, list[dict[str, Any]]]:
    """The ``hooks`` mapping, each event's hook running ``command(event)``."""
    found: dict[str, list[dict[str, Any]]] = {}
    for event, matcher, timeout, on_failure in HOOKS:
        hook: dict[str, Any] = {"type": "command", "command": command(event), "timeout": timeout}
        if on_failure:
            hook["onFailure"] = on_failure
        group: dict[str, Any] = {} if matcher is None else {"matcher": matcher}
        group["hooks"] = [hook]
        found.setdefault(event, []).append(group)
    return found


def plugin_hooks() -> dict[str, list[dict[str, Any]]]:
    """hooks/hooks.json's ``hooks`` (the client sets CLAUDE_PLUGIN_ROOT for a plugin)."""
    return hooks_for(lambda event: PLUGIN_COMMAND + event)


def root() -> Path:
    """The directory holding the ``manager`` package: a clone, or site-packages."""
    return Path(__file__).resolve().parents[2]


def command(event: str, python: str | None = None) -> str:
    """The plugin's launcher, told what the plugin's client would tell it: its root, and
    the interpreter (this one) that has workspace."""
    launcher = root() / "manager" / "claude" / "launcher" / "workspace-hook"
    return (f"{ROOT_VAR}{shlex.quote(str(root()))} "
            f"WORKSPACE_PYTHON={shlex.quote(python or sys.executable)} "
            f"{shlex.quote(str(launcher))} {event}")


def is_ours(entry: Any) -> bool:
    if not isinstance(entry, dict):
        return False
    text = str(entry.get("command", ""))
    return LEGACY_MARKER in text or (text.startswith(ROOT_VAR) and MARKER in text)


def read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise WorkspaceError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise WorkspaceError(f"{path} is not valid JSON ({exc}); it was left untouched",
                             hint="fix the file by hand, then run this again") from exc
    if not isinstance(data, dict) or not isinstance(data.get("hooks", {}), dict):
        raise WorkspaceError(f"{path} does not hold a settings object with a 'hooks' mapping; "
                             "it was left untouched", hint="fix the file by hand")
    return data


def without_ours(data: dict[str, Any]) -> dict[str, Any]:
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return data
    cleaned: dict[str, Any] = {}
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            cleaned[event] = groups
            continue
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                inner = [h for h in group["hooks"] if not is_ours(h)]
                if not inner and group["hooks"]:
                    continue         # a group that held only our hooks
                group = dict(group, hooks=inner)
            kept.append(group)
        if kept or not groups:
            cleaned[event] = kept
    result = dict(data)
    if cleaned:
        result["hooks"] = cleaned
    else:
        result.pop("hooks", None)
    return result


def with_ours(data: dict[str, Any], python: str | None = None) -> dict[str, Any]:
    result = without_ours(data)
    hooks = dict(result.get("hooks") or {})
    for event, groups in hooks_for(lambda event: command(event, python)).items():
        hooks[event] = [*hooks.get(event, []), *groups]
    result["hooks"] = hooks
    return result


def write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    write_json_atomic(path, data, sort_keys=False, mode=mode)  # the user's order kept


def install(path: Path, python: str | None = None) -> bool:
    """Install; True when the file changed."""
    data = read(path)
    new = with_ours(data, python)
    if path.exists() and new == data:
        return False
    write(path, new)
    return True


def uninstall(path: Path) -> bool:
    if not path.exists():
        return False
    data = read(path)
    new = without_ours(data)
    if new == data:
        return False
    write(path, new)
    return True


def status(path: Path) -> str:
    """"installed", "outdated" (ours, but not as this release writes them: install again),
    "partial", "absent" (no entries of ours) or "unreadable: ..."."""
    try:
        data = read(path)
    except WorkspaceError as exc:
        return f"unreadable: {exc.message}"
    found = current = 0
    want = hooks_for(command)
    for event, matcher, _, _ in HOOKS:
        for group in (data.get("hooks") or {}).get(event, []) or []:
            if isinstance(group, dict) and group.get("matcher") == matcher and any(
                    is_ours(h) for h in group.get("hooks") or []):
                found += 1
                current += any(h in g["hooks"] for g in want[event] for h in group["hooks"])
                break
    if found == len(HOOKS):
        return "installed" if current == found else "outdated"
    return "partial" if found else "absent"
