"""The typed records of the plugin's on-disk state match what the code writes (issue 9)."""

from __future__ import annotations

import json
import typing

from manager.claude import hotconfig
from manager.claude import records
from manager.claude import state
from manager.session import store

from .conftest import Claude


def test_hot_config_record_has_the_keys_the_hook_caches():
    assert set(typing.get_type_hints(records.HotConfig)) == set(hotconfig.KEYS)


def test_hot_record_has_the_keys_session_start_writes(claude: Claude):
    claude.start()
    written = json.loads((store.session_dir("sess-1") / state.HOT).read_text())
    assert set(written) == set(typing.get_type_hints(records.Hot))
    assert set(written["config"]) == set(hotconfig.KEYS)
    assert written["format"] == 1 and written["code"][0] == state.CODE
    assert state.read_hot("sess-1") == written
