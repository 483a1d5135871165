"""``workspace reset`` and ``budget`` outside git: JSON when asked, one wording (issue 9)."""

from __future__ import annotations

import json

from manager.session import store

WORDING = "is not in a git repository: the diff budget and checkpoints are off here"


def _session_outside_git(project):
    session = store.create(project, "overlay", session_id="nogit-1")
    store.set_current(project, session.id)
    return session


def test_reset_json_outside_git_is_json(ws, project):
    _session_outside_git(project)
    answer = json.loads(ws("reset", "--json", check=True).stdout)
    assert answer == {"session": "nogit-1", "enabled": False}


def test_budget_json_outside_git_is_the_same_shape(ws, project):
    _session_outside_git(project)
    answer = json.loads(ws("budget", "--json", check=True).stdout)
    assert answer == {"session": "nogit-1", "enabled": False}


def test_not_in_git_has_one_wording(ws, project):
    _session_outside_git(project)
    said = [ws("reset", check=True).stdout, ws("budget", check=True).stdout,
            ws("checkpoint").stderr, ws("checkpoints").stderr]
    assert all(f"{project} {WORDING}" in text for text in said), said
