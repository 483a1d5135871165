"""A session keeps the engine it was made with; when the configuration names another (or
names one in a project file that is not trusted), run says so once and status every time."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.engine


def _user_config(tmp_path: Path, text: str) -> None:
    (tmp_path / "config/workspace").mkdir(parents=True, exist_ok=True)
    (tmp_path / "config/workspace/config.yaml").write_text(text)


def test_a_changed_engine_is_stated_not_silently_kept(ws, tmp_path: Path):
    ws("run", "--engine", "overlay", "--", "true", check=True)
    _user_config(tmp_path, "engine: docker\n")
    first = ws("run", "--", "true", check=True)
    assert "the configuration says engine docker" in first.stderr
    assert "this session keeps overlay" in first.stderr
    assert "configuration says" not in ws("run", "--", "true", check=True).stderr  # once
    assert "this session keeps overlay" in ws("status", check=True).stdout          # always
    _user_config(tmp_path, "engine: auto\n")
    assert "configuration says" not in ws("status", check=True).stdout
    assert "configuration says" not in ws("run", "--", "true", check=True).stderr


def test_an_untrusted_engine_setting_is_said_to_be_ignored(ws, project: Path):
    ws("run", "--engine", "overlay", "--", "true", check=True)
    (project / ".workspace.yaml").write_text("engine: docker\n")
    said = ws("run", "--", "true", check=True).stderr
    assert "engine setting is ignored" in said and "not trusted" in said
    assert "engine setting is ignored" in ws("status", check=True).stdout
