"""Session ids repeat across the users and state directories that share one daemon (the docker
group's users; a copied state dir; every test's ``sess-1``, the root and ordinary-account passes
side by side): neither session may remove, stop or use the other's container or volume.

Seen in CI: a session's first call removed "its leftover container" by name, which was the
other pass's running one, so that call failed with "container ... is not running".
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from manager.engines.container.base import lower_volume_name
from manager.engines.container.base import resource_name
from manager.engines.container.base import session_of
from tests.claude.conftest import Claude
from tests.engines import conftest as engines
from tests.engines.conftest import using_engine

pytestmark = [pytest.mark.engine, pytest.mark.as_user]


@pytest.fixture(params=["docker", "podman", "docker-volume", "podman-volume"])
def container_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                     ) -> Iterator[str]:
    yield from using_engine(request, monkeypatch)


def _container_id(cli: str, name: str) -> str:
    return subprocess.run([cli, "container", "inspect", "--format", "{{.Id}} {{.State.Running}}",
                           name], capture_output=True, text=True, check=True).stdout.strip()


def test_the_same_session_id_in_another_state_dir_leaves_this_ones_alone(
        project: Path, tmp_path: Path, container_engine: str,
        monkeypatch: pytest.MonkeyPatch):
    cli = container_engine.split("-")[0]
    mine = Claude(project, tmp_path)
    mine.env["WORKSPACE_ENGINE"] = cli
    assert mine.start().returncode == 0
    assert mine.bash("echo mine > kept.txt").returncode == 0
    before = _container_id(cli, resource_name("sess-1"))

    other_state = tmp_path / "other-state"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "project").mkdir()
    theirs = Claude(tmp_path / "other" / "project", tmp_path / "other")
    theirs.env.update(WORKSPACE_ENGINE=cli, XDG_STATE_HOME=str(other_state))
    try:
        assert theirs.start().returncode == 0
        ran = theirs.bash("echo theirs > theirs.txt")
        assert ran.returncode == 0, ran.stderr
        theirs_name = resource_name("sess-1", str(other_state / "workspace"))
        assert theirs_name != resource_name("sess-1")
        assert _container_id(cli, theirs_name).endswith(" true")
        assert _container_id(cli, resource_name("sess-1")) == before   # same one, running
        seen = mine.bash("cat kept.txt; ls theirs.txt")
        assert seen.stdout == "mine\n" and seen.returncode != 0, seen
    finally:
        with monkeypatch.context() as other:
            other.setenv("XDG_STATE_HOME", str(other_state))
            engines._remove_containers(cli)


def test_names_carry_the_state_dir_and_read_back():
    state = "/home/someone/.local/state/workspace"
    name = resource_name("sess-1", state)
    assert name.startswith("workspace-sess-1-") and name != resource_name("sess-1", state + "x")
    assert session_of(name, state) == "sess-1"
    assert session_of(lower_volume_name("sess-1", state), state) == "sess-1"
    # A label naming "lower-<id>" never spells another session's project volume (gc).
    assert resource_name("lower-sess-1", state) != lower_volume_name("sess-1", state)
    assert session_of(name, state + "x") is None
    assert session_of("workspace-sess-1", state) is None   # an older version's: not this dir's
