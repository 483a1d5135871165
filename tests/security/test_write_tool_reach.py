"""Claude's writing tools (Write, Edit, MultiEdit, NotebookEdit) act on the host, from the
client: they may write only inside the project, never its ``.git``, Claude Code's project
files, or the interpreter that runs the hooks. Whatever else they could write runs later
on the host: shell start-up files, ~/.gitconfig, ~/.local/bin, ~/.claude.json, a venv's
``.pth`` files. Judged on the resolved target: symlinks, ``..``, parents not made yet."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.claude.conftest import REPO
from tests.claude.conftest import Claude
from tests.security.conftest import file_tool_answer

TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit")


def _refused(claude: Claude, path: Path | str) -> bool:
    decisions = {file_tool_answer(claude, path, tool).get("permissionDecision") for tool in TOOLS}
    assert len(decisions) == 1, (path, decisions)            # one rule for every tool
    return decisions == {"deny"}


OUTSIDE = ["home/.bashrc", "home/.profile", "home/.gitconfig", "home/.claude.json",
           "home/.local/bin/git", "home/.config/git/config", "home/.ssh/config",
           "home/not-yet/deeper/file.txt", "elsewhere.txt", "home/.new-dir/later/x"]
INSIDE_REFUSED = [".git/config", ".git/hooks/post-index-change", ".git/info/attributes",
                  "sub/.git/config", ".mcp.json", ".claude/commands/x.md",
                  ".claude/agents/a.md", ".claude/settings.json"]
INSIDE_ALLOWED = ["ordinary.py", "new/dir/file.txt", ".workspace.yaml", ".gitignore",
                  ".gitattributes", ".github/workflows/ci.yml", "docs/.git-notes.md"]


@pytest.mark.parametrize("relative", OUTSIDE)
def test_outside_the_project_is_refused(claude: Claude, tmp_path: Path, relative: str) -> None:
    assert _refused(claude, tmp_path / relative)


@pytest.mark.parametrize("relative", INSIDE_REFUSED)
def test_what_runs_programs_inside_the_project_is_refused(claude: Claude, project: Path,
                                                          relative: str) -> None:
    assert _refused(claude, project / relative)


@pytest.mark.parametrize("relative", INSIDE_ALLOWED)
def test_the_projects_own_files_are_allowed(claude: Claude, project: Path, relative: str) -> None:
    claude.start()
    assert not _refused(claude, project / relative)


def test_resolved_targets_are_judged(claude: Claude, project: Path, tmp_path: Path) -> None:
    claude.start()
    outside = tmp_path / "outside"
    (outside / "a" / "b").mkdir(parents=True)
    (project / "to-dir").symlink_to(outside)
    (project / "to-bashrc").symlink_to(tmp_path / "home" / ".bashrc")
    (project / "to-b").symlink_to(outside / "a" / "b")
    (project / "to-git").symlink_to(project / ".git")
    (project / "inner").mkdir()
    (project / "to-inner").symlink_to(project / "inner")
    for path in (project / "to-dir" / "x.txt", project / "to-bashrc",
                 project / "to-dir" / "not-yet" / "x.txt",
                 f"{project}/to-b/../x.txt",                 # kernel: outside/a/x.txt
                 f"{project}/../outside/x.txt", f"{project}/new/../../outside/x.txt",
                 project / "to-git" / "config", "../outside/relative.txt"):
        assert _refused(claude, path), path
    assert not _refused(claude, project / "to-inner" / "x.txt")
    assert not _refused(claude, "relative/inside.txt")


def test_a_hard_link_to_a_file_outside_is_refused(claude: Claude, project: Path,
                                                  tmp_path: Path) -> None:
    claude.start()
    (tmp_path / "home" / ".bashrc").write_text("# the user's\n")
    os.link(tmp_path / "home" / ".bashrc", project / "linked.sh")
    assert _refused(claude, project / "linked.sh")


def test_the_venv_running_the_hook_is_refused_inside_the_project(claude: Claude,
                                                                 project: Path) -> None:
    """A clone with its .venv in it: the interpreter that runs the hook is not the agent's."""
    venv = project / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    claude.env["WORKSPACE_PYTHON"] = str(venv / "bin" / "python")
    site = next(venv.glob("lib/python3*/site-packages"))
    for path in (site / "evil.pth", venv / "bin" / "python3", venv / "pyvenv.cfg"):
        assert _refused(claude, path), path
    assert not _refused(claude, project / "src" / "mod.py")


def test_the_plugins_code_is_refused(claude: Claude) -> None:
    for path in (REPO / "bin" / "workspace-hook", REPO / "manager" / "claude" / "pretool.py"):
        assert _refused(claude, path), path


def test_plan_mode_files_are_allowed_but_not_through_a_link_out(claude: Claude,
                                                                tmp_path: Path) -> None:
    """The client has the Write tool put plan mode's plan in Claude's plans directory."""
    plans = tmp_path / "home" / ".claude" / "plans"
    plans.mkdir(parents=True)
    assert not _refused(claude, plans / "a-plan.md")
    (plans / "out").symlink_to(tmp_path / "home")
    assert _refused(claude, plans / "out" / ".bashrc")
