from __future__ import annotations

import re
from pathlib import Path

import pytest

from manager.errors import StateError
from manager.session import paths
from tests import conftest


def test_state_is_temporary(tmp_path):
    assert tmp_path in paths.state_home().parents


def test_forgetting_the_state_dir_fails_loudly(monkeypatch):
    monkeypatch.delenv("XDG_STATE_HOME")
    with pytest.raises(StateError, match="forgot"):
        paths.state_home()


# -- the real-state guard (tests/conftest.py), on stand-in directories --------------------------

@pytest.fixture
def real(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ...]:
    """Stand-ins for ~/.local/state/workspace and ~/.claude, outside the test's tmp dir."""
    base = tmp_path_factory.mktemp("real-home")
    (base / "claude" / "projects").mkdir(parents=True)
    return base / "state", base / "claude"


def test_guard_catches_state_the_test_made(tmp_path: Path, real: tuple[Path, ...]):
    state, claude = real
    before = conftest.snapshot(real)
    (state / "sessions" / "ws-1").mkdir(parents=True)
    (state / "sessions" / "ws-1" / "session.json").write_text(f'{{"project": "{tmp_path}/proj"}}')
    encoded = re.sub(r"[^A-Za-z0-9]", "-", str(tmp_path / "proj"))
    (claude / "projects" / encoded).mkdir()
    assert conftest.leaked(tmp_path, before, real) == [
        str(claude / "projects" / encoded), str(state / "sessions" / "ws-1" / "session.json")]


def test_guard_ignores_what_other_processes_change(tmp_path: Path, real: tuple[Path, ...]):
    state, claude = real
    before = conftest.snapshot(real)
    (state / "sessions" / "ws-2").mkdir(parents=True)
    (state / "sessions" / "ws-2" / "session.json").write_text('{"project": "/home/me/proj"}')
    (claude / "projects" / "-home-me-proj").mkdir()
    (claude / "settings.json").write_text("{}")
    assert conftest.leaked(tmp_path, before, real) == []


def test_guard_catches_a_changed_file_and_a_removal(tmp_path: Path, real: tuple[Path, ...]):
    _, claude = real
    settings = claude / "settings.json"
    settings.write_text("{}")
    mine = claude / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(tmp_path))
    mine.mkdir()
    before = conftest.snapshot(real)
    settings.write_text(f'{{"hooks": "{tmp_path}/plugin/bin/workspace-hook"}}')
    mine.rmdir()
    assert conftest.leaked(tmp_path, before, real) == [str(mine), str(settings)]
