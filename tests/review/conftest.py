"""Review tests run the real CLI over the built-in overlay engine and real git repositories."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import Runner


@pytest.fixture(autouse=True)
def _on_overlay(overlay_engine: str) -> None:
    """Every test here runs on the built-in overlay engine (the root conftest's fixture)."""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(project: Path) -> Path:
    git(project, "init", "-q", "-b", "main")
    git(project, "config", "user.email", "user@example.com")
    git(project, "config", "user.name", "User")
    (project / ".gitignore").write_text(".venv/\nbuild/\n")
    (project / "a.py").write_text("one\ntwo\nthree\n")
    (project / "b.py").write_text("x = 1\n")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "initial")
    return project


@pytest.fixture
def sandboxed(ws: Runner) -> Runner:
    """``workspace run -- sh -c SCRIPT``, checked."""

    def run(script: str) -> subprocess.CompletedProcess[str]:
        return ws("run", "--", "sh", "-c", script, check=True)

    return run
