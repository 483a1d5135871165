"""The container CLI client: typed errors from the real engine, labelled containers, births."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from manager.engines.container.cli import ContainerClient
from manager.engines.container.cli import ContainerCommandError
from manager.engines.container.upper import parse_births
from tests.engines.conftest import engine_cli

container = pytest.mark.parametrize("engine_name", ["docker", "podman"], indirect=True)


@pytest.mark.engine
@container
def test_a_failed_command_raises_with_its_command_status_and_output(engine_name: str):
    client = ContainerClient(engine_cli(engine_name))
    name = f"ws-test-missing-{uuid.uuid4().hex[:8]}"
    argv = [client.cli, "container", "inspect", name]
    with pytest.raises(ContainerCommandError) as caught:
        client.run(argv)
    exc = caught.value
    assert exc.command == argv and exc.returncode != 0
    assert name in exc.stderr and exc.last_line() in exc.stderr
    assert exc.no_such_container or "no such object" in exc.stderr.lower()


@pytest.mark.engine
@container
def test_removing_what_is_gone_is_fine(engine_name: str):
    client = ContainerClient(engine_cli(engine_name))
    client.remove_container(f"ws-test-gone-{uuid.uuid4().hex[:8]}")
    client.remove_volume_quietly(f"ws-test-gone-{uuid.uuid4().hex[:8]}")


@pytest.mark.engine
@container
def test_labelled_lists_only_its_own_containers(engine_name: str, tmp_path: Path):
    client = ContainerClient(engine_cli(engine_name))
    value = str(tmp_path)
    assert client.labelled(engine_name, "org.workspace.state", value, "org.workspace.session") == []


def test_an_engine_not_installed_has_no_labelled_containers():
    client = ContainerClient("ws-no-such-engine-binary")
    assert client.labelled("docker", "l", "v", "s") == []


def test_births_read_as_stat_prints_them(tmp_path: Path):
    raw = (b"1700000000.123456789 ./a.txt\0"
           b"1700000001 ./dir/b\0"
           b"0.000000000 ./unknown\0"        # 0: the filesystem does not know
           b"-1 ./also-unknown\0"
           b"1700000002.5 ./with space\0")
    assert parse_births(raw, tmp_path) == {
        str(tmp_path / "a.txt"): 1700000000_123456789,
        str(tmp_path / "dir/b"): 1700000001_000000000,
        str(tmp_path / "with space"): 1700000002_500000000,
    }
