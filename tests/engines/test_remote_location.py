"""Where the container engine is (issue 26): the engines' own conventions, read as they do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from manager.config import Config
from manager.engines.container.remote import location

VARIABLES = ("DOCKER_HOST", "DOCKER_CONTEXT", "CONTAINER_HOST", "CONTAINER_CONNECTION",
             "DOCKER_CONFIG")


@pytest.fixture(autouse=True)
def _no_engine_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for variable in VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))


def where(cli: str, setting: str = "") -> tuple[str, str, bool]:
    found = location(cli, Config({"container.host": setting}))
    return found.kind, found.value, found.remote


def test_nothing_named_is_local():
    assert where("docker") == ("local", "", False)
    assert where("podman") == ("local", "", False)


def test_the_clients_own_variables(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///var/run/docker.sock")   # the default: local
    assert where("docker") == ("host", "unix:///var/run/docker.sock", False)
    monkeypatch.setenv("DOCKER_HOST", "ssh://me@build")
    assert where("docker") == ("host", "ssh://me@build", True)
    assert where("podman") == ("local", "", False)   # each client reads its own
    monkeypatch.setenv("CONTAINER_CONNECTION", "farm")
    assert where("podman") == ("context", "farm", True)


def test_docker_context_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "docker").mkdir()
    (tmp_path / "docker/config.json").write_text(json.dumps({"currentContext": "farm"}))
    assert where("docker") == ("context", "farm", True)
    monkeypatch.setenv("DOCKER_CONTEXT", "default")   # the variable wins, as for docker
    assert where("docker") == ("local", "", False)
    monkeypatch.setenv("DOCKER_CONTEXT", "other")
    assert where("docker") == ("context", "other", True)


def test_the_setting_wins(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://elsewhere:2376")
    assert where("docker", "tcp://build:2376") == ("host", "tcp://build:2376", True)
    assert where("docker", "farm") == ("context", "farm", True)
