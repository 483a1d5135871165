"""Read-only git runs in the sandbox: it shows the sandbox's changes, does not copy
.git/index into the sandbox by refreshing it, and repository configuration the
agent wrote with its own (unsandboxed) Write tool can only run programs there."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.claude.conftest import Claude

from .conftest import in_upper


def test_git_status_and_diff_show_the_sandboxs_changes(claude: Claude, repo: Path) -> None:
    claude.start()
    assert claude.bash("echo x >> a.txt").returncode == 0
    assert (repo / "a.txt").read_text() == "a\n"                      # the real file: unchanged
    status = claude.bash("git status --short")
    assert status.stdout.strip() == "M a.txt", status
    assert "+x" in claude.bash("git diff").stdout
    assert claude.bash("git status --porcelain | wc -l").stdout.strip() == "1"


def test_read_only_git_does_not_copy_the_index(claude: Claude, repo: Path) -> None:
    claude.start()
    (repo / "a.txt").write_text("touched later, so git status would refresh the index\n")
    # `git diff` (whose index refresh ignores GIT_OPTIONAL_LOCKS): the test below.
    for command in ("git status", "git status --short", "git status --porcelain -uall"):
        assert claude.bash(command).returncode == 0
        assert not in_upper(repo / ".git" / "index").exists(), command
        assert not in_upper(repo / ".git" / "index.lock").exists(), command
    assert claude.bash("git add a.txt").returncode == 0               # a write still works
    assert in_upper(repo / ".git" / "index").exists()


def test_git_diff_after_an_edit_does_not_copy_the_index(claude: Claude, repo: Path) -> None:
    """From an ordinary account the sandbox shows the user's files as root's; git compares
    owners, so `git diff` (which refreshes the index whatever GIT_OPTIONAL_LOCKS says)
    found every untouched file stat-dirty and wrote .git/index into the sandbox."""
    (repo / "b.txt").write_text("b\n")
    subprocess.run(["git", "add", "b.txt"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-qm", "b"],
                   cwd=repo, check=True, capture_output=True)
    claude.start()
    assert claude.bash("echo x >> a.txt").returncode == 0
    for command in ("git diff", "git diff --stat", "git -c color.ui=never diff a.txt b.txt"):
        run = claude.bash(command)
        assert run.returncode == 0 and "a.txt" in run.stdout, (command, run)
        assert "b.txt" not in run.stdout, (command, run)     # untouched: not shown
        assert not in_upper(repo / ".git" / "index").exists(), command
    # The agent's own `git -c` still applies, after (and over) the sandbox's setting.
    shown = claude.bash("git -c core.checkStat=default config core.checkStat").stdout.strip()
    assert shown == "default"


def test_repository_config_runs_only_inside(claude: Claude, repo: Path, tmp_path: Path) -> None:
    """The Write tool may not write the real .git/config; config that got there by
    another road runs only inside, for the git the agent runs."""
    marker = tmp_path / "fsmonitor-ran"
    claude.start()
    config = repo / ".git" / "config"
    assert claude.hook("PreToolUse", {"tool_name": "Write", "tool_use_id": "toolu_w1",
                                      "tool_input": {"file_path": str(config),
                                                     "content": "x"}}).decision == "deny"
    script = tmp_path / "fsmon.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    with config.open("a") as f:
        f.write(f"[core]\n\tfsmonitor = {script}\n\tpager = touch {marker}.pager\n"
                f"[diff \"t\"]\n\ttextconv = touch {marker}.textconv\n")
    (repo / ".gitattributes").write_text("*.txt diff=t\n")
    (repo / "a.txt").write_text("b\n")
    for command in ("git status", "git -p diff", "git diff"):
        claude.bash(command)
    assert not any(p.name.startswith("fsmonitor-ran") for p in tmp_path.iterdir()), \
        "repository config ran a program on the host"
    assert in_upper(marker).exists(), "git did not run the fsmonitor in the sandbox"
