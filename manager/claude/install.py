"""Merge workspace's hooks into a Claude Code settings file, for use without the plugin.

Our entries are recognised by their command (``-m manager.claude``), so
installing twice gives a byte-identical file, uninstalling removes only ours,
and every other hook and setting stays as it was. A file that does not parse is
refused and left untouched. Writes are atomic (temp file, fsync, rename).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from manager.errors import WorkspaceError
from manager.fs.util import write_json_atomic

MARKER = "-m manager.claude"
# (event, matcher or None, timeout in seconds): the same set as hooks/hooks.json.
HOOKS = (
    ("SessionStart", None, 60),
    ("UserPromptSubmit", None, 30),
    ("PreToolUse", "Bash", 60),
    ("PreToolUse", "Read|Edit|Write|MultiEdit|NotebookEdit", 60),
    ("PostToolUse", "Bash|Write", 60),
    ("Stop", None, 60),
    ("SubagentStop", None, 60),
    ("SessionEnd", None, 15),
)


def settings_path(global_: bool, project: Path) -> Path:
    if global_:
        base = os.environ.get("CLAUDE_CONFIG_DIR")
        return Path(base) / "settings.json" if base else Path.home() / ".claude" / "settings.json"
    return project / ".claude" / "settings.json"


def command(event: str, python: str | None = None) -> str:
    return f"{shlex.quote(python or sys.executable)} -I {MARKER} {event}"


def is_ours(entry: Any) -> bool:
    return isinstance(entry, dict) and MARKER in str(entry.get("command", ""))


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
    for event, matcher, timeout in HOOKS:
        group: dict[str, Any] = {} if matcher is None else {"matcher": matcher}
        group["hooks"] = [{"type": "command", "command": command(event, python),
                           "timeout": timeout}]
        hooks[event] = [*hooks.get(event, []), group]
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
    """"installed", "partial", "absent" (no entries of ours) or "unreadable: ..."."""
    try:
        data = read(path)
    except WorkspaceError as exc:
        return f"unreadable: {exc.message}"
    found = 0
    for event, matcher, _ in HOOKS:
        for group in (data.get("hooks") or {}).get(event, []) or []:
            if isinstance(group, dict) and group.get("matcher") == matcher and any(
                    is_ours(h) for h in group.get("hooks") or []):
                found += 1
                break
    if found == len(HOOKS):
        return "installed"
    return "partial" if found else "absent"
