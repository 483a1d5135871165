"""The engine behaviour suite runs once per engine.

Locally an engine that cannot run here is skipped with its reason. In CI
(``CI`` set) nothing skips: a missing engine (either form of try included) or a
broken one is a failure. try runs once per form (see tryforms).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from manager import config
from manager.engines import registry
from manager.engines.container.base import lower_volume_name
from manager.engines.container.base import resource_name
from manager.errors import EngineUnavailable
from manager.session import paths
from manager.session import store
from tests.engines import accounts
from tests.engines import tryforms
from tests.engines.accounts import Account

CONTAINER_ENGINES = set(registry.CONTAINER_ENGINES)   # the one table's, not a copy
ENGINES = ["overlay", *tryforms.FORMS, "podman", "docker", "docker-volume"]
MAY_SKIP_IN_CI: set[str] = set()
# "<engine>-volume": a container engine in volume mode (container.upper: volume), which hosts
# that cannot hold an overlay use; forced here, where the host mode works too.
VOLUME_SUFFIX = "-volume"


def engine_cli(name: str) -> str:
    """The engine a parametrisation id runs ("docker-volume" -> "docker", "try-main" -> "try")."""
    return "try" if name in tryforms.FORMS else name.removesuffix(VOLUME_SUFFIX)


SYSTEM_ENGINES = ["overlay", *tryforms.FORMS]  # container engines overlay only the project


def _unavailable(name: str) -> str | None:
    if name == "try":  # a real call through try each time: once per script is enough
        return try_unavailable(os.environ.get(tryforms.PATH_SETTING, ""))
    if name == "overlay":
        return overlay_unavailable(os.environ.get("PATH", ""))
    try:
        return registry.get(name)(config.load(None)).health_check()
    except EngineUnavailable as exc:
        return str(exc)


_HEALTHY: set[tuple[str, str]] = set()


def _healthy_once(name: str, key: str) -> str | None:
    """An engine's health check (a real trial call) once per ``key`` when it passes: a
    failure is asked again at the next test, never kept (one slow trial on a loaded machine
    must not fail every later test of the run)."""
    if (name, key) in _HEALTHY:
        return None
    why = registry.get(name)(config.load(None)).health_check()
    if why is None:
        _HEALTHY.add((name, key))
    return why


def overlay_unavailable(path: str) -> str | None:
    """Overlay's health check is a trial call (a holder, the entry, a write: ~0.7 s): the
    host's answer once per PATH is enough, not once per test."""
    return _healthy_once("overlay", path)


def try_unavailable(path: str) -> str | None:
    """try's health check (a real call through it), once per ``path``: the try.path in force."""
    return _healthy_once("try", path)


def _use(name: str, monkeypatch: pytest.MonkeyPatch) -> str:
    engine = engine_cli(name)
    _keep_user_storage(engine, monkeypatch)
    if name in tryforms.FORMS:
        tryforms.use(name, monkeypatch)  # before the health check, which reads try.path
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


def _keep_user_storage(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rootless podman keeps its images under the data home: the test's fake HOME has none."""
    if engine == "podman" and os.getuid() != 0 and not os.environ.get("XDG_DATA_HOME"):
        monkeypatch.setenv("XDG_DATA_HOME", str(Path(pwd.getpwuid(os.getuid()).pw_dir) / ".local/share"))


def using_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The body of an engine-parametrized fixture: the engine selected, its containers removed."""
    name = _use(request.param, monkeypatch)
    yield name
    if engine_cli(name) in CONTAINER_ENGINES:
        _remove_containers(engine_cli(name))


@pytest.fixture(params=ENGINES)
def engine_name(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from using_engine(request, monkeypatch)


@pytest.fixture(params=accounts.KINDS)
def account(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Account]:
    acct = accounts.make(request.param, tmp_path)
    yield acct
    accounts.clean(acct)


def _remove_containers(cli: str) -> None:
    """The test's session containers (one per session, reused across its calls) and volumes.

    Then the overlay work dirs, which the engine's root owns, so pytest can remove tmp dirs.
    """
    sessions, _ = store.list_sessions()
    engine = registry.get(cli)(config.load(None))
    # This test's state dir only: the other account's pass shares the daemon and session ids.
    state = f"label=org.workspace.state={paths.state_home()}"
    for session in sessions:
        label = f"label=org.workspace.session={session.id}"
        ids = subprocess.run([cli, "ps", "-aq", "--filter", label, "--filter", state],
                             capture_output=True, text=True).stdout.split()
        if ids:
            subprocess.run([cli, "rm", "-f", "-v", *ids], capture_output=True)
        for volume in (resource_name(session.id), lower_volume_name(session.id)):  # remote's
            subprocess.run([cli, "volume", "rm", volume], capture_output=True)
        with contextlib.suppress(EngineUnavailable):
            engine.clear_work(session)


@pytest.fixture(params=SYSTEM_ENGINES)
def system_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Engines that overlay the whole filesystem, not only the project."""
    return _use(request.param, monkeypatch)
