"""A throwaway probe plugin for harness tests: hooks that log their stdin and answer as told.

``make_probe_plugin(dir, ...)`` writes ``.claude-plugin/plugin.json``, ``hooks/hooks.json`` and one
``hook.py`` that every event runs. The hook appends one JSON line per call to ``hook-log.jsonl``
(``{"event", "input", "env", "cwd"}``) and answers from ``behaviour.json``, which a test may rewrite
between runs:

- ``rewrite``: ``{original command: new command}`` for PreToolUse on Bash (answers ``updatedInput``,
  copying every other field),
- ``decision``: PreToolUse ``permissionDecision`` to send with it (``allow``, ``deny``,
  ``ask``) or null,
- ``stop_block``: a reason; Stop answers ``{"decision": "block"}`` unless ``stop_hook_active``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SubagentStop",
    "SessionEnd",
)

HOOK_SOURCE = r"""
import json, os, sys
HERE = os.path.dirname(os.path.abspath(__file__))
raw = sys.stdin.read()
try:
    data = json.loads(raw)
except ValueError:
    data = {"unparsed": raw}
env = {k: v for k, v in os.environ.items()
       if k.startswith("CLAUDE") or k in ("PWD", "HOME", "TMPDIR", "XDG_STATE_HOME")}
with open(os.path.join(HERE, "hook-log.jsonl"), "a") as f:
    f.write(json.dumps({"event": data.get("hook_event_name"), "input": data, "env": env,
                        "cwd": os.getcwd()}) + "\n")
try:
    with open(os.path.join(HERE, "behaviour.json")) as f:
        behaviour = json.load(f)
except (OSError, ValueError):
    behaviour = {}
event = data.get("hook_event_name")
out = None
if event == "PreToolUse" and data.get("tool_name") == "Bash":
    tool_input = dict(data.get("tool_input") or {})
    new = behaviour.get("rewrite", {}).get(tool_input.get("command"))
    spec = {"hookEventName": "PreToolUse"}
    if new is not None:
        tool_input["command"] = new
        spec["updatedInput"] = tool_input
    if behaviour.get("decision"):
        spec["permissionDecision"] = behaviour["decision"]
        spec["permissionDecisionReason"] = "probe plugin says " + behaviour["decision"]
    if len(spec) > 1:
        out = {"hookSpecificOutput": spec}
elif event == "Stop" and behaviour.get("stop_block") and not data.get("stop_hook_active"):
    out = {"decision": "block", "reason": behaviour["stop_block"]}
if out is not None:
    sys.stdout.write(json.dumps(out))
"""


@dataclass
class ProbePlugin:
    root: Path

    @property
    def log_path(self) -> Path:
        return self.root / "hook-log.jsonl"

    def configure(self, **behaviour: Any) -> None:
        (self.root / "behaviour.json").write_text(json.dumps(behaviour))

    def calls(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line]

    def events(self) -> list[str]:
        return [c["event"] for c in self.calls()]

    def inputs(self, event: str) -> list[dict[str, Any]]:
        return [c["input"] for c in self.calls() if c["event"] == event]

    def clear(self) -> None:
        self.log_path.unlink(missing_ok=True)


def make_probe_plugin(root: Path, name: str = "probe", **behaviour: Any) -> ProbePlugin:
    (root / ".claude-plugin").mkdir(parents=True, exist_ok=True)
    (root / "hooks").mkdir(exist_ok=True)
    (root / ".claude-plugin" / "plugin.json").write_text(
        json.dumps({"name": name, "version": "0.0.1", "description": "e2e probe"})
    )
    command = f"{sys.executable} -I -S ${{CLAUDE_PLUGIN_ROOT}}/hook.py"
    hooks: dict[str, Any] = {}
    for event in EVENTS:
        entry: dict[str, Any] = {"hooks": [{"type": "command", "command": command, "timeout": 30}]}
        if event in ("PreToolUse", "PostToolUse"):
            entry["matcher"] = "Bash"
        hooks[event] = [entry]
    (root / "hooks" / "hooks.json").write_text(json.dumps({"description": "probe", "hooks": hooks}))
    (root / "hook.py").write_text(HOOK_SOURCE)
    plugin = ProbePlugin(root)
    plugin.configure(**behaviour)
    return plugin
