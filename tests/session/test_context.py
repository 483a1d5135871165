"""One session resolver for the commands and the guard rails (issue 9)."""

from __future__ import annotations

import pytest

from manager.errors import StateError
from manager.errors import WorkspaceError
from manager.guardrails.target import for_cli
from manager.session import store
from manager.session.context import Context


def test_commands_and_guard_rails_resolve_the_same_session(tmp_path, project):
    other = tmp_path / "other"
    other.mkdir()
    mine = store.create(project, "overlay", session_id="mine-1")
    theirs = store.create(other, "overlay", session_id="theirs-1")
    store.set_current(project, mine.id)
    ctx = Context.load(str(project))
    for named in (None, mine.id, theirs.id):
        target = for_cli(named, str(project))
        assert target.session is not None
        assert target.session.id == ctx.session(named).id == (named or mine.id)
    # A session named by id keeps its own project's settings.
    assert for_cli(theirs.id, str(project)).ctx.project == other


def test_no_session_is_an_error_on_both_sides(project):
    ctx = Context.load(str(project))
    assert ctx.find_session() is None and ctx.find_session("none-1") is None
    with pytest.raises(WorkspaceError, match="no workspace session"):
        ctx.session()
    with pytest.raises(StateError, match="no session 'none-1'"):
        ctx.session("none-1")
    with pytest.raises(WorkspaceError, match="no workspace session"):
        for_cli(None, str(project))


def test_open_or_create_resumes_what_the_resolver_finds(project, monkeypatch):
    monkeypatch.setenv("WORKSPACE_ENGINE", "overlay")    # named, not probed: no sandbox is made
    ctx = Context.load(str(project))
    created = ctx.open_or_create("made-1")
    assert ctx.find_session() == created == ctx.open_or_create()
    assert ctx.open_or_create(new=True).id != created.id
