"""Fixtures for the hook layer: run the real launcher as Claude Code would, and
evaluate a rewritten command the way the client's shell does."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
HOOK = REPO / "bin" / "workspace-hook"
SAMPLES = Path(__file__).resolve().parent / "samples"


@dataclass
class HookResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.stdout) if self.stdout.strip() else {}

    @property
    def spec(self) -> dict[str, Any]:
        return dict(self.json.get("hookSpecificOutput") or {})

    @property
    def decision(self) -> str | None:
        return self.spec.get("permissionDecision")

    @property
    def command(self) -> str:
        return str(self.spec["updatedInput"]["command"])


@dataclass
class ClientRun:
    returncode: int
    stdout: str
    stderr: str
    cwd: str | None            # what the client would record as its cwd


class Claude:
    """A fake client session: hook payloads with a fixed session id and a tracked cwd."""

    def __init__(self, project: Path, tmp: Path, session_id: str = "sess-1",
                 engine: str = "overlay") -> None:
        self.project = project
        self.tmp = tmp
        self.session_id = session_id
        self.cwd = str(project)
        self.mode = "bypassPermissions"
        self.env = dict(os.environ, CLAUDE_PROJECT_DIR=str(project), CLAUDE_PLUGIN_ROOT=str(REPO),
                        WORKSPACE_ENGINE=engine)
        self.env.pop("CLAUDE_PID", None)
        self.calls = 0
        self.launcher = HOOK

    def hook(self, event: str, payload: dict[str, Any] | str | bytes,
             cwd: str | None = None) -> HookResult:
        if isinstance(payload, dict):
            data = {"session_id": self.session_id, "cwd": cwd or self.cwd,
                    "hook_event_name": event, **payload}
            raw: bytes = json.dumps(data).encode()
        else:
            raw = payload.encode() if isinstance(payload, str) else payload
        proc = subprocess.run([str(self.launcher), event], input=raw, capture_output=True,
                              cwd=cwd or self.cwd, env=self.env, timeout=120)
        return HookResult(proc.returncode, proc.stdout.decode(), proc.stderr.decode())

    def start(self, source: str = "startup") -> HookResult:
        return self.hook("SessionStart", {"source": source})

    def pre_bash(self, command: str, **fields: Any) -> HookResult:
        self.calls += 1
        return self.hook("PreToolUse", {"tool_name": "Bash", "permission_mode": self.mode,
                                        "tool_input": {"command": command, **fields},
                                        "tool_use_id": f"toolu_{self.calls:04d}"})

    def shell(self, command: str, timeout: float = 60) -> ClientRun:
        """Run as the client does: bash -c '... && eval '<command>' && pwd -P >| file'."""
        cwd_file = self.tmp / f"client-cwd-{self.calls}"
        cwd_file.unlink(missing_ok=True)
        escaped = command.replace("'", "'\"'\"'")
        script = f"shopt -u extglob 2>/dev/null || true && eval '{escaped}' && pwd -P >| {cwd_file}"
        proc = subprocess.run(["/bin/bash", "-c", script], capture_output=True, cwd=self.cwd,
                              env=dict(self.env, PWD=self.cwd), timeout=timeout)
        recorded = cwd_file.read_text().strip() if cwd_file.exists() else None
        if recorded:
            self.cwd = recorded
        return ClientRun(proc.returncode, proc.stdout.decode(errors="surrogateescape"),
                         proc.stderr.decode(errors="replace"), recorded)

    def bash(self, command: str, **fields: Any) -> ClientRun:
        """PreToolUse, then run what it answered (the original when it did not rewrite)."""
        answer = self.pre_bash(command, **fields)
        assert answer.returncode == 0, answer.stderr
        assert answer.decision != "deny", answer.json
        run = answer.command if "updatedInput" in answer.spec else command
        return self.shell(run)


@pytest.fixture
def claude(project: Path, tmp_path: Path) -> Claude:
    return Claude(project, tmp_path)


@pytest.fixture
def sample() -> Callable[[str], dict[str, Any]]:
    def load(name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((SAMPLES / f"{name}.json").read_text())
        return data

    return load
