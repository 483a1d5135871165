"""Attack pass: a project file the agent writes stalls the PreToolUse hook past its
timeout, and the client then runs the call as the model wrote it, unsandboxed.

`.workspace.yaml` is the agent's to write (the Write tool acts on the real project). A
YAML alias bomb there (each level a list of ten aliases of the one before) is small on
disk and loads fast (aliases are shared), but the config check refuses it with a message
holding the value's repr, `expects list, got [[...]]`: the whole expansion, 10**depth
items. Depth 6 takes ~6 s and ~300 MB in the hook; depth 7 ~60 s (the PreToolUse
hook's timeout in hooks/hooks.json) and ~3 GB; depth 8 ~10 min and ~30 GB. Claude
Code's hooks reference: "A timed-out command, http, or mcp_tool hook doesn't block the
tool call", and the call runs with its original input: on the host.

Reproduction (any engine, any account): write the file below into the project (Write
tool), then any Bash call; the hook answers after minutes, if at all.

    exclude:
      - &a0 ["x","x","x","x","x","x","x","x","x","x"]
      - &a1 [*a0,*a0,*a0,*a0,*a0,*a0,*a0,*a0,*a0,*a0]
      ... up to &a8

The first test needs no client: the hook must answer quickly whatever the project file
holds (depth 6 here, so that the test itself stays cheap). The second runs the real
client with the plugin's hook timeout shortened to 3 s (a copy of the plugin), so depth 6
is enough to show what the client does with a hook that does not answer in time.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _bomb(depth: int) -> str:
    lines = ["exclude:", '  - &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    lines += [f"  - &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, depth + 1)]
    return "\n".join(lines) + "\n"


def test_a_project_file_cannot_stall_the_hook(tmp_path: Path):
    from tests.claude.conftest import Claude

    project = tmp_path / "proj"
    project.mkdir()
    (project / ".workspace.yaml").write_text(_bomb(6))
    claude = Claude(project, tmp_path)
    claude.env.update(HOME=str(tmp_path / "home"), XDG_STATE_HOME=str(tmp_path / "state"),
                      XDG_CONFIG_HOME=str(tmp_path / "config"))
    started = time.monotonic()
    answer = claude.pre_bash("touch x.txt")
    took = time.monotonic() - started
    assert answer.returncode == 0 and answer.decision == "deny", answer.stdout[:300]
    assert took < 3, f"the hook took {took:.1f} s on a {len((project / '.workspace.yaml').read_bytes())}" \
                     f"-byte project file (x10 per level: the client's 60 s timeout lets the call out)"


@pytest.mark.e2e
def test_a_stalled_hook_does_not_let_the_call_out(tmp_path: Path):
    from tests.e2e.claude import ClaudeEnv
    from tests.e2e.claude import find_claude_bin
    from tests.e2e.fake_api import Bash

    claude_bin = find_claude_bin()
    if claude_bin is None:
        pytest.skip("Claude Code CLI not installed (scripts/setup.d)")
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    for name in (".claude-plugin", "bin", "commands", "manager"):
        os.symlink(REPO / name, plugin / name)
    os.symlink(REPO / ".venv", plugin / ".venv")
    (plugin / "hooks").mkdir()
    hooks = json.loads((REPO / "hooks" / "hooks.json").read_text())
    for group in hooks["hooks"]["PreToolUse"]:
        for hook in group["hooks"]:
            hook["timeout"] = 3
    (plugin / "hooks" / "hooks.json").write_text(json.dumps(hooks))

    project = tmp_path / "proj"
    project.mkdir()
    (project / ".workspace.yaml").write_text(_bomb(6))
    canary = Path(f"/tmp/ws-attack-{uuid.uuid4().hex}")
    env = ClaudeEnv.create(tmp_path / "claude-env", claude_bin)
    try:
        result = env.run(project, [Bash(f"touch {canary}"), "done"], plugin_dir=plugin,
                         env={"WORKSPACE_ENGINE": "overlay"}, timeout=120)
        assert not canary.exists(), \
            f"the hook did not answer in time and the client ran the call on the host:\n{result.describe()}"
    finally:
        canary.unlink(missing_ok=True)
        env.cleanup()


def test_a_project_file_that_never_ends_cannot_stall_the_hook(tmp_path: Path):
    """The same through a committed entry: `mkfifo .workspace.yaml` (or a symlink to
    /dev/zero: an unbounded read) made in the sandbox and committed (review lists a fifo
    or a symlink; nothing says the hook will then read it). config.py reads the file with
    `path.read_text()`: the hook blocks on the fifo until the client's timeout lets the
    call out. Here the fifo is made in the real project directly."""
    import subprocess

    from tests.claude.conftest import HOOK

    project = tmp_path / "proj"
    project.mkdir()
    os.mkfifo(project / ".workspace.yaml")
    env = dict(os.environ, CLAUDE_PROJECT_DIR=str(project), CLAUDE_PLUGIN_ROOT=str(REPO),
               WORKSPACE_ENGINE="overlay", HOME=str(tmp_path / "home"),
               XDG_STATE_HOME=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    payload = json.dumps({"session_id": "s", "cwd": str(project), "hook_event_name": "PreToolUse",
                          "tool_name": "Bash", "permission_mode": "bypassPermissions",
                          "tool_input": {"command": "touch x"}, "tool_use_id": "toolu_1"})
    try:
        proc = subprocess.run([str(HOOK), "PreToolUse"], input=payload.encode(), capture_output=True,
                              cwd=project, env=env, timeout=10)
    except subprocess.TimeoutExpired:
        fd = os.open(project / ".workspace.yaml", os.O_WRONLY | os.O_NONBLOCK)   # EOF for the
        os.unlink(project / ".workspace.yaml")                                     # hook's python,
        os.close(fd)                                                               # no second open
        pytest.fail("the hook was still reading the fifo after 10 s (the client gives it 60 s, "
                    "then runs the call on the host)")
    assert json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


@pytest.mark.parametrize("tool", ["Bash", "Write"])
def test_a_hook_past_its_deadline_is_killed_and_the_call_denied(tmp_path: Path, tool: str):
    """Whatever stalls the hook (a settings file on a hung filesystem, a bug), the entry
    kills it before the client's timeout would let the call out, and denies the call."""
    import subprocess

    from tests.claude.conftest import HOOK

    stalled = tmp_path / "python"
    stalled.write_text("#!/bin/sh\nexec sleep 30\n")
    stalled.chmod(0o755)
    project = tmp_path / "proj"
    project.mkdir()
    env = dict(os.environ, CLAUDE_PROJECT_DIR=str(project), CLAUDE_PLUGIN_ROOT=str(REPO),
               WORKSPACE_PYTHON=str(stalled), WORKSPACE_HOOK_DEADLINE="1",
               HOME=str(tmp_path / "home"), XDG_STATE_HOME=str(tmp_path / "state"))
    tool_input = {"command": "touch x"} if tool == "Bash" else {"file_path": str(project / "x"),
                                                                "content": "x"}
    payload = json.dumps({"session_id": "s", "cwd": str(project), "hook_event_name": "PreToolUse",
                          "tool_name": tool, "tool_input": tool_input, "tool_use_id": "toolu_1"})
    started = time.monotonic()
    proc = subprocess.run([str(HOOK), "PreToolUse"], input=payload.encode(), capture_output=True,
                          cwd=project, env=env, timeout=20)
    assert time.monotonic() - started < 10
    spec = json.loads(proc.stdout)["hookSpecificOutput"]
    assert spec["permissionDecision"] == "deny" and "did not answer within 1 s" in \
        spec["permissionDecisionReason"], spec
