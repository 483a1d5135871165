"""The conformance probe runs once per engine, each form of try included (see tests/engines)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.engines import tryforms
from tests.engines.conftest import CONTAINER_ENGINES
from tests.engines.conftest import _remove_containers
from tests.engines.conftest import _use
from tests.engines.conftest import engine_cli

ENGINES = ["overlay", *tryforms.FORMS, "podman", "docker"]


@pytest.fixture(params=ENGINES)
def conformance_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = _use(request.param, monkeypatch)
    yield name
    if engine_cli(name) in CONTAINER_ENGINES:
        _remove_containers(engine_cli(name))
