from __future__ import annotations

import pytest

from manager.errors import StateError
from manager.session import paths


def test_state_is_temporary(tmp_path):
    assert tmp_path in paths.state_home().parents


def test_forgetting_the_state_dir_fails_loudly(monkeypatch):
    monkeypatch.delenv("XDG_STATE_HOME")
    with pytest.raises(StateError, match="forgot"):
        paths.state_home()
