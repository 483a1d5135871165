"""The guard-rail state has one owner: its side file, written under its own lock (issue 9)."""

from __future__ import annotations

import multiprocessing

from manager.guardrails import state as guardstate
from manager.session import store

ROUNDS = 150


def _count_guard_edits(session_id: str) -> None:
    for _ in range(ROUNDS):
        with guardstate.edit(session_id) as state:
            budget = state.setdefault("budget", {})
            budget["blocks"] = budget.get("blocks", 0) + 1


def _save_session_notes(session_id: str) -> None:
    for i in range(ROUNDS):
        session = store.load(session_id)
        session.notes.append(f"note {i}")
        store.save(session)


def test_concurrent_guard_edits_and_session_saves_lose_nothing(project):
    session = store.create(project, "overlay", session_id="race-1")
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_count_guard_edits, args=(session.id,)),
               ctx.Process(target=_count_guard_edits, args=(session.id,)),
               ctx.Process(target=_save_session_notes, args=(session.id,))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=240)
        assert worker.exitcode == 0
    assert guardstate.read(session.id)["budget"]["blocks"] == 2 * ROUNDS
    # Nobody but the notes writer saved the record, so none of its saves was overwritten.
    assert store.load(session.id).notes == [f"note {i}" for i in range(ROUNDS)]


def test_state_written_before_the_session_exists_is_found_after(project):
    with guardstate.edit("early-1") as state:
        state["guard_project"] = str(project)
    store.create(project, "overlay", session_id="early-1")
    assert guardstate.read("early-1") == {"guard_project": str(project)}
    assert guardstate.latest_for(project) == "early-1"


def test_the_typed_schema_matches_what_the_guard_rails_write(git_repo, project):
    import json
    import typing

    from manager.guardrails import actions

    event = actions.Event("schema-1", str(project))
    actions.on_session_start(event)
    (project / "new.txt").write_text("x\n" * 500)
    assert actions.on_stop(event).block
    assert actions.on_stop(actions.Event("schema-1", str(project), agent_id="a1"), subagent=True)
    from manager import versioning

    written = json.loads(guardstate.side_file("schema-1").read_text())
    assert written.pop(versioning.KEY) and written.pop(versioning.BY)   # versioning's marks

    def keys(record: type) -> set[str]:
        return set(typing.get_type_hints(record))

    assert set(written) == keys(guardstate.GuardState)
    assert set(written["budget"]) <= keys(guardstate.Budget)
    assert {"baseline", "blocks", "agent_blocks", "last"} <= set(written["budget"])
    cp = written["checkpoints"]
    assert set(cp) == keys(guardstate.Checkpoints)
    assert set(cp["stream"]) <= keys(guardstate.Stream) and cp["items"]
    assert all(set(item) == keys(guardstate.Checkpoint) for item in cp["items"])
