"""The engine behaviour suite runs once per engine.

Locally an engine that cannot run here is skipped with its reason. In CI
(``CI`` set) only the try engine may skip: a missing container engine or a
broken overlay engine is a failure.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from manager import config
from manager.engines import registry
from manager.errors import EngineUnavailable
from manager.session import store

ENGINES = ["overlay", "try", "podman", "docker", "docker-volume"]
MAY_SKIP_IN_CI = {"try"}
CONTAINER_ENGINES = {"podman", "docker"}
# "<engine>-volume": a container engine in volume mode (container.upper: volume), which hosts
# that cannot hold an overlay use; forced here, where the host mode works too.
VOLUME_SUFFIX = "-volume"


def engine_cli(name: str) -> str:
    """The engine a parametrisation id runs ("docker-volume" -> "docker")."""
    return name.removesuffix(VOLUME_SUFFIX)
SYSTEM_ENGINES = ["overlay", "try"]  # container engines overlay only the project


def _unavailable(name: str) -> str | None:
    try:
        return registry.get(name)(config.load(None)).health_check()
    except EngineUnavailable as exc:
        return str(exc)


def _use(name: str, monkeypatch: pytest.MonkeyPatch) -> str:
    engine = engine_cli(name)
    reason = _unavailable(engine)
    if reason:
        if os.environ.get("CI") and engine not in MAY_SKIP_IN_CI:
            pytest.fail(f"engine {name} must run in CI: {reason}")
        pytest.skip(f"engine {name} unavailable here: {reason}")
    monkeypatch.setenv("WORKSPACE_ENGINE", engine)
    if engine in CONTAINER_ENGINES:   # explicit: auto would probe once per test's state dir
        upper = "volume" if name.endswith(VOLUME_SUFFIX) else "host"
        monkeypatch.setenv("WORKSPACE_CONTAINER__UPPER", upper)
    return name


@pytest.fixture(params=ENGINES)
def engine_name(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = _use(request.param, monkeypatch)
    yield name
    if engine_cli(name) in CONTAINER_ENGINES:
        _remove_containers(engine_cli(name))


def _remove_containers(cli: str) -> None:
    """The test's session containers (one per session, reused across its calls) and volumes."""
    sessions, _ = store.list_sessions()
    for session in sessions:
        label = f"label=org.workspace.session={session.id}"
        ids = subprocess.run([cli, "ps", "-aq", "--filter", label],
                             capture_output=True, text=True).stdout.split()
        if ids:
            subprocess.run([cli, "rm", "-f", "-v", *ids], capture_output=True)
        subprocess.run([cli, "volume", "rm", f"workspace-{session.id}"], capture_output=True)


@pytest.fixture(params=SYSTEM_ENGINES)
def system_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Engines that overlay the whole filesystem, not only the project."""
    return _use(request.param, monkeypatch)
