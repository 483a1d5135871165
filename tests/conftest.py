"""Shared fixtures: every test gets its own state directories, and a sandbox built by hand."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.overlay_model import Tree


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var, sub in (("XDG_STATE_HOME", "state"), ("XDG_CONFIG_HOME", "config"), ("HOME", "home")):
        (tmp_path / sub).mkdir()
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.setenv("WORKSPACE_FORBID_DEFAULT_STATE", "1")
    monkeypatch.delenv("CLAUDE_PLUGIN_DATA", raising=False)
    yield


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree.make(tmp_path / "t")
