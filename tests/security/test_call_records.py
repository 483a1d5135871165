"""Issue 20 finding 3: what a container writes about calls never holds commit back.

``/run/ws-calls`` is writable inside the container (ws-exec keeps its call
registry there). Commit and discard counted a record there as a running call
when its second field named a live host pid: ``x 1`` (host pid 1, alive forever)
made both refuse for good. The records they wait for are now the host's own,
kept where the container cannot write, and checked by pid and start time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engines.conftest import using_engine

pytestmark = pytest.mark.engine

# Forged records: host pid 1; the pid of a process that is alive on the host; pid and a
# start time; a name like the host's own records.
PLANTED = {"zz": "x 1", "pid1": "1 1", "self": "$$ $PPID", "sess-cwd": "1 0 1"}


@pytest.fixture(params=["docker", "podman"])
def container_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                     ) -> Iterator[str]:
    yield from using_engine(request, monkeypatch)


def _plant(ws) -> None:  # type: ignore[no-untyped-def]
    script = "; ".join(f'echo "{text}" > /run/ws-calls/{name}' for name, text in PLANTED.items())
    ws("run", "--", "bash", "-c", script, check=True)


def test_planted_call_records_block_neither_commit_nor_discard(ws, project: Path,
                                                              container_engine: str,
                                                              monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("WORKSPACE_COMMIT__WAIT_SECONDS", "1")
    ws("run", "--", "sh", "-c", "echo kept > kept.txt", check=True)
    _plant(ws)
    proc = ws("commit")
    assert proc.returncode == 0, proc.stderr
    assert (project / "kept.txt").read_text() == "kept\n"

    ws("run", "--", "sh", "-c", "echo dropped > dropped.txt", check=True)
    _plant(ws)
    proc = ws("discard", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert not (project / "dropped.txt").exists()


def test_a_stale_host_record_is_dropped(ws, project: Path, container_engine: str):
    """The host's own records name a pid and its start time: pid 1 with another start time
    (a reused pid), or a pid that is gone, holds nothing back and is removed."""
    from manager.session import store

    ws("run", "--", "sh", "-c", "echo kept > kept.txt", check=True)
    sessions, _ = store.list_sessions()
    running = sessions[0].sandbox / "running"
    stale = {"reused": "1 0", "gone": f"{2**22 + 1} 5"}
    for name, text in stale.items():
        (running / name).write_text(text + "\n")
    proc = ws("commit")
    assert proc.returncode == 0, proc.stderr
    assert (project / "kept.txt").read_text() == "kept\n"
    assert not any((running / name).exists() for name in stale)

