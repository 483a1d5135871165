"""Real git repositories in temporary directories, and a snapshot of what the user sees."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitrepo import Git
from gitrepo import init_repo


@pytest.fixture
def git_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def git_repo(project: Path, git_env: None) -> Git:
    """The ``project`` fixture as a git repository with one commit, as a ``Git`` handle: the
    guard rails' own tree (its line counts are what the budget tests measure)."""
    git = init_repo(project)
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("".join(f"line {i}\n" for i in range(50)))
    (project / "tool.sh").write_text("#!/bin/sh\necho tool\n")
    (project / "tool.sh").chmod(0o755)
    (project / ".gitignore").write_text("*.log\nbuild/\n")
    git("add", "-A")
    git("commit", "-qm", "initial")
    return git
