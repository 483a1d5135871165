"""Fixtures for end-to-end tests with the real Claude Code CLI.

- ``claude_bin``: path of the CLI (session). Missing CLI: the tests skip with the reason, unless
  ``WORKSPACE_E2E_REQUIRED=1`` (CI sets it), where they fail.
- ``claude_env``: a fresh isolated :class:`ClaudeEnv` under ``tmp_path``; leftover processes it
  started are killed at teardown.
- ``run_claude``: ``claude_env.run`` (``run_claude(project_dir, script, plugin_dir=None,
  permission_mode="bypassPermissions", extra_args=(), timeout=60, ...)``).
- ``project_dir``: an empty project directory under ``tmp_path``.

Every test in this directory is marked ``e2e``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .claude import PINNED_VERSION
from .claude import SETUP_SCRIPT
from .claude import ClaudeEnv
from .claude import ClaudeRun
from .claude import find_claude_bin

HERE = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: end-to-end tests with the real Claude Code CLI")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    found = find_claude_bin()
    if found is None:
        script = SETUP_SCRIPT.relative_to(SETUP_SCRIPT.parents[2])
        reason = f"Claude Code CLI {PINNED_VERSION} not installed: run {script}"
        if os.environ.get("WORKSPACE_E2E_REQUIRED") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


@pytest.fixture
def claude_env(tmp_path: Path, claude_bin: Path) -> Iterator[ClaudeEnv]:
    env = ClaudeEnv.create(tmp_path / "claude-env", claude_bin)
    try:
        yield env
    finally:
        env.cleanup()


@pytest.fixture
def run_claude(claude_env: ClaudeEnv) -> Callable[..., ClaudeRun]:
    return claude_env.run


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


@pytest.fixture(autouse=True)
def _real_home_untouched(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    """Belt and braces: even code in the test process itself sees a throwaway HOME."""
    monkeypatch.setenv("HOME", str(tmp_path / "test-home"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "test-home" / ".claude"))
    yield
