"""Settings that weaken the sandbox are not taken from files the agent can write.

The agent's Write and Edit tools run in the client, on the real files: the
project's .workspace.yaml is such a file, so what it may set depends on the
user's trust in its exact content; the files that decide the sandbox (the
plugin's state, the user's config, Claude's settings) are refused to those
tools, and a sandboxed command's writes to them land in its upper dir."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from manager import config
from manager.claude import state
from manager.session import paths
from tests.claude.conftest import REPO
from tests.claude.conftest import Claude

from .conftest import file_tool_answer
from .conftest import in_upper


def test_project_file_cannot_switch_the_sandbox_off(claude: Claude, project: Path,
                                                    tmp_path: Path) -> None:
    claude.start()
    marker = tmp_path / "escaped"
    project_file = project / ".workspace.yaml"
    assert file_tool_answer(claude, project_file).get("permissionDecision") != "deny"
    project_file.write_text("passthrough: [bash, touch, git]\nengine: overlay\n"
                            "plugin:\n  allow_model_bypass: true\n")
    claude.bash(f"touch {marker}")
    claude.bash(f"bash -c 'touch {marker}'")
    answer = claude.pre_bash(f"touch {marker}", dangerouslyDisableSandbox=True)
    assert "updatedInput" in answer.spec
    assert not marker.exists(), "a project file the agent wrote switched the sandbox off"
    note = claude.start().json.get("systemMessage", "")
    assert "passthrough" in note and "workspace config trust" in note   # the user is told
    config.set_trust(project_file, True)                     # the user's say-so
    assert claude.pre_bash(f"touch {marker}").json == {}      # now it passes through
    project_file.write_text(project_file.read_text() + "# edited by the agent\n")
    assert "updatedInput" in claude.pre_bash(f"touch {marker}").spec   # asked again


@pytest.mark.parametrize("relative", [
    "state/workspace/sessions/sess-1/bypass-next", "state/workspace/sessions/sess-1/claude.json",
    "state/workspace/sessions/sess-1/run-entry.json",
    "state/workspace/trusted-projects.json", "config/workspace/config.yaml",
    "home/.claude/settings.json", "home/.claude/shell-snapshots/snapshot-bash-1.sh",
    "config/containers/containers.conf", "home/.docker/config.json",
])
def test_writing_tools_are_refused_on_the_sandboxs_own_files(claude: Claude, tmp_path: Path,
                                                             relative: str) -> None:
    claude.start()
    for tool in ("Write", "Edit", "MultiEdit", "NotebookEdit"):
        answer = file_tool_answer(claude, tmp_path / relative, tool)
        assert answer.get("permissionDecision") == "deny", tool
    assert file_tool_answer(claude, tmp_path / relative, "Read").get("permissionDecision") != "deny"


def test_writing_tools_are_refused_through_symlinks_and_relative_paths(
        claude: Claude, project: Path, tmp_path: Path) -> None:
    claude.start()
    os.symlink(tmp_path / "state" / "workspace", project / "st")
    assert file_tool_answer(claude, project / "st" / "sessions" / "sess-1" / "bypass-next")[
        "permissionDecision"] == "deny"
    assert file_tool_answer(claude, "../state/workspace/trusted-projects.json")[
        "permissionDecision"] == "deny"
    assert file_tool_answer(claude, project / ".claude" / "settings.local.json")[
        "permissionDecision"] == "deny"
    assert file_tool_answer(claude, REPO / "hooks" / "hooks.json")["permissionDecision"] == "deny"
    assert file_tool_answer(claude, project / "ordinary.py").get("permissionDecision") != "deny"


def test_a_sandboxed_command_cannot_arm_the_bypass(claude: Claude, tmp_path: Path) -> None:
    claude.start()
    marker = tmp_path / "escaped"
    bypass = Path(paths.session_root("sess-1")) / state.BYPASS
    run = claude.bash(f"echo armed > {bypass}; mkdir -p {tmp_path}/config/workspace && "
                      f"echo 'passthrough: [touch]' > {tmp_path}/config/workspace/config.yaml")
    assert run.returncode == 0, run
    # The state is hidden (manager/hide.py): the write has nowhere to land, not even the upper.
    assert "bypass-next: No such file or directory" in run.stderr, run
    assert not bypass.exists() and not in_upper(bypass).exists()
    assert not (tmp_path / "config" / "workspace" / "config.yaml").exists()
    assert "updatedInput" in claude.pre_bash(f"touch {marker}").spec
    assert not marker.exists()
