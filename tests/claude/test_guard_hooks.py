"""The guard rails through the real launcher (``bin/workspace-hook``), as Claude Code runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from manager.guardrails import state
from manager.session import store

from .conftest import Claude

pytestmark = pytest.mark.engine


def git_project(claude: Claude, limit: int | None = 20) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=claude.project, check=True, capture_output=True)

    claude.env.update(GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")
    git("init", "-q", "-b", "main")
    git("-c", "user.name=T", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "0")
    if limit is not None:
        # A YAML file: the hook runs with `python -S` and must still read it.
        (claude.project / ".workspace.yaml").write_text(f"budget:\n  limit: {limit}\n")


def stop(claude: Claude, active: bool = False, **extra: Any) -> dict[str, Any]:
    answer = claude.hook("Stop", {"stop_hook_active": active, **extra})
    assert answer.returncode == 0, answer.stderr
    return answer.json


def subagent_stop(claude: Claude, agent: str, active: bool = False) -> dict[str, Any]:
    answer = claude.hook("SubagentStop", {"stop_hook_active": active, "agent_id": agent,
                                          "agent_type": "general-purpose"})
    assert answer.returncode == 0, answer.stderr
    return answer.json


def lines(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(n))


def test_stop_reads_the_project_yaml_and_sees_the_sandbox(claude: Claude) -> None:
    git_project(claude)
    claude.start()
    assert stop(claude) == {}
    claude.bash(f"printf '{lines(30)}' > sandboxed.txt")
    assert not (claude.project / "sandboxed.txt").exists()
    out = stop(claude)
    assert out["decision"] == "block", out
    assert "30/20 lines changed" in out["reason"] and "sandboxed.txt (30)" in out["reason"]
    again = stop(claude, active=True)
    assert "decision" not in again and "not blocking again" in again["systemMessage"]


def test_after_clear_the_adopted_session_keeps_its_baseline_and_sandbox(claude: Claude) -> None:
    git_project(claude)
    claude.start()
    claude.bash(f"printf '{lines(30)}' > before-clear.txt")
    claude.session_id = "sess-2"
    claude.start("clear")
    assert not store.exists("sess-2")
    out = stop(claude)
    assert out["decision"] == "block" and "before-clear.txt" in out["reason"], out
    assert state.read("sess-1")["budget"]["blocks"] == 1
    assert state.read("sess-2") == {}


def test_subagent_sequences_count_their_own_blocks(claude: Claude) -> None:
    git_project(claude)
    claude.start()
    (claude.project / "big.txt").write_text(lines(30))
    assert stop(claude)["decision"] == "block"
    # A subagent's fresh sequence neither resets nor uses up the main agent's count.
    assert subagent_stop(claude, "agent-a")["decision"] == "block"
    assert "decision" not in subagent_stop(claude, "agent-a", active=True)
    assert subagent_stop(claude, "agent-b")["decision"] == "block"
    assert "decision" not in stop(claude, active=True)
    assert stop(claude)["decision"] == "block"          # a new main sequence


def test_subagent_stop_is_skipped_when_configured_and_never_checkpoints(claude: Claude) -> None:
    git_project(claude)
    (claude.project / ".workspace.yaml").write_text(
        "budget:\n  limit: 20\n  subagents: false\n")
    claude.start()
    (claude.project / "big.txt").write_text(lines(30))
    assert subagent_stop(claude, "agent-a") == {}
    assert "checkpoints" not in state.read("sess-1")
    assert stop(claude)["decision"] == "block"
    assert len(state.read("sess-1")["checkpoints"]["items"]) == 1


def test_non_git_project_is_quiet(claude: Claude) -> None:
    (claude.project / ".workspace.yaml").write_text("budget:\n  limit: 1\n")
    claude.start()
    (claude.project / "big.txt").write_text(lines(30))
    for event in ("Stop", "SubagentStop"):
        answer = claude.hook(event, {"stop_hook_active": False})
        assert (answer.returncode, answer.stdout) == (0, "")
    answer = claude.hook("UserPromptSubmit", {"prompt": "hello"})
    assert (answer.returncode, answer.stdout) == (0, "")
    assert not (claude.project / ".git").exists()


def test_a_stop_that_changed_nothing_writes_nothing(claude: Claude) -> None:
    git_project(claude)
    claude.start()
    (claude.project / "a.txt").write_text("a\n")
    stop(claude)
    side = state.side_file("sess-1")
    before = side.stat().st_mtime_ns, side.read_bytes()
    for _ in range(2):
        assert stop(claude) == {}
    assert (side.stat().st_mtime_ns, side.read_bytes()) == before


def test_workspace_cli_sees_what_the_hook_recorded(claude: Claude) -> None:
    git_project(claude)
    claude.start()
    (claude.project / "a.txt").write_text(lines(5))
    stop(claude)
    out = subprocess.run([sys.executable, "-m", "manager", "budget", "--json"],
                         cwd=claude.project, capture_output=True, text=True, env=claude.env)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert (report["used"], report["limit"]) == (5, 20)
    assert isinstance(claude.project, Path)


def test_the_guard_rails_get_a_typed_event_not_the_hook_input():
    from manager.claude.guard import guard_event
    from manager.guardrails.actions import Event

    assert guard_event({"session_id": "s-1", "cwd": "/p", "stop_hook_active": True,
                        "agent_id": "a1", "new_field": [1]}) == Event("s-1", "/p", True, "a1")
    # Anything not of its type is left out, never passed on.
    assert guard_event({"session_id": "s-1", "cwd": 3, "stop_hook_active": "yes",
                        "agent_id": ""}) == Event("s-1", None, False, None)
    assert guard_event({"session_id": 5}) is None and guard_event({}) is None
