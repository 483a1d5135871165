from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from manager.errors import StateError
from manager.session import store


def test_create_load_roundtrip(project):
    session = store.create(project, "overlay", session_id="abc-1")
    loaded = store.load("abc-1")
    assert loaded.project == str(project) and loaded.engine == "overlay"
    assert session.sandbox.is_dir()


def test_records_are_written_atomically(project):
    session = store.create(project, "overlay")
    leftovers = [p.name for p in session.dir.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


@pytest.mark.parametrize("bad_id", ["../x", "", "a/b", ".hidden", "x" * 200])
def test_invalid_ids_are_refused(bad_id):
    with pytest.raises(StateError):
        store.validate_id(bad_id)


@pytest.mark.parametrize("content", ["{not json", "[]", '{"id": "x"}'])
def test_malformed_record_is_a_clear_error_and_nothing_is_lost(project, content):
    session = store.create(project, "overlay", session_id="broken")
    (session.sandbox / "upperdir").mkdir()
    (session.sandbox / "upperdir/keep").write_text("work")
    record = session.dir / store.RECORD
    record.write_text(content)
    with pytest.raises(StateError, match="nothing was changed|malformed"):
        store.load("broken")
    found, errors = store.list_sessions()
    assert found == [] and len(errors) == 1
    assert record.read_text() == content
    assert (session.sandbox / "upperdir/keep").read_text() == "work"


def test_cli_survives_a_malformed_record(ws, project):
    session = store.create(project, "overlay", session_id="broken")
    (session.dir / store.RECORD).write_text("{oops")
    store.set_current(project, "broken")
    proc = ws("status")
    assert proc.returncode == 1 and "unreadable" in proc.stderr
    listing = ws("sessions", "--json", check=True)
    assert json.loads(listing.stdout)["errors"]


def test_current_pointer_per_project(tmp_path, project):
    other = tmp_path / "other"
    other.mkdir()
    a = store.create(project, "overlay")
    b = store.create(other, "overlay")
    store.set_current(project, a.id)
    store.set_current(other, b.id)
    assert store.current(project).id == a.id and store.current(other).id == b.id


def test_malformed_pointer_is_a_clear_error(project):
    store.set_current(project, "x")
    pointer = next(Path(store.paths.projects_dir()).iterdir())
    pointer.write_text("garbage")
    with pytest.raises(StateError, match="pointer"):
        store.current(project)


def _hold(path: str, queue: multiprocessing.Queue) -> None:
    from manager.fs.util import locked

    with locked(Path(path)):
        queue.put("held")
        queue.get()


def test_exclusive_lock_times_out_with_a_clear_error(project):
    session = store.create(project, "overlay")
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    holder = ctx.Process(target=_hold, args=(str(session.lock_path), queue))
    holder.start()
    assert queue.get(timeout=10) == "held"
    try:
        with pytest.raises(Exception, match="busy"), store.lock(session, timeout=0.2):
            pass
    finally:
        queue.put("release")
        holder.join(10)
