"""Volume mode (container.upper: volume): the overlay lives in the engine, changes come out as tar."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from manager import config
from manager.engines import registry
from manager.engines.container.base import resource_name
from manager.session import store
from tests.engines.conftest import engine_cli
from tests.engines.support import status

pytestmark = [pytest.mark.engine,
              pytest.mark.parametrize("engine_name", ["docker-volume", "podman-volume"],
                                      indirect=True)]


def current(project: Path) -> store.Session:
    session = store.current(project)
    assert session is not None
    return session


def test_overlay_is_in_the_volume_not_on_the_host(ws, project: Path, engine_name: str):
    ws("run", "--", "sh", "-c", "echo v > v.txt && rm README.txt", check=True)
    session = current(project)
    assert not (session.sandbox / "upper/v.txt").exists()   # nothing exported yet
    assert status(ws) == {str(project / "v.txt"): "added", str(project / "README.txt"): "deleted"}
    assert (session.sandbox / "upper/v.txt").read_text() == "v\n"   # the exported copy


def test_changes_survive_release_and_a_lost_container(ws, project: Path, engine_name: str):
    cli = engine_cli(engine_name)
    ws("run", "--", "sh", "-c", "mkdir d && echo 1 > d/one", check=True)
    session = current(project)
    registry.make(cli, config.load(None)).release(session)   # exported, volume removed
    assert not (session.sandbox / "volume").exists()
    ws("run", "--", "sh", "-c", "echo 2 > d/two", check=True)   # a fresh volume, pushed
    # The container vanishes without an export: the volume still holds the changes.
    subprocess.run([cli, "rm", "-f", resource_name(session.id)], check=True, capture_output=True)
    assert status(ws) == {str(project / "d"): "added", str(project / "d/one"): "added",
                          str(project / "d/two"): "added"}
    assert ws("run", "--", "cat", "d/one", "d/two", check=True).stdout == "1\n2\n"


def test_commit_then_more_work(ws, project: Path, engine_name: str):
    ws("run", "--", "sh", "-c", "echo a > a && echo b > b && echo more >> README.txt", check=True)
    ws("commit", str(project / "a"), str(project / "README.txt"), check=True)
    assert (project / "a").read_text() == "a\n"
    assert status(ws) == {str(project / "b"): "added"}
    out = ws("run", "--", "sh", "-c", "cat a README.txt b && rm b", check=True).stdout
    assert out == "a\nhello\nmore\nb\n"
    assert status(ws) == {}
    ws("discard", "--yes", check=True)
    assert ws("run", "--", "ls", check=True).stdout.split() == ["README.txt", "a"]


def test_calls_cannot_undo_the_overlay(ws, project: Path, engine_name: str):
    script = (f"umount {project} 2>/dev/null && echo unmounted; "
              f"mount -o remount,rw /run/ws-lower 2>/dev/null && echo remounted; "
              f"echo x > /run/ws-lower/escape 2>/dev/null && echo escaped; echo done")
    assert ws("run", "-c", script, check=True).stdout == "done\n"
    assert not (project / "escape").exists()
