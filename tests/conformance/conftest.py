"""The conformance probe runs once per engine, each form of try included (see tests/engines)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.engines import tryforms
from tests.engines.conftest import using_engine

ENGINES = ["overlay", *tryforms.FORMS, "podman", "docker"]


@pytest.fixture(params=ENGINES)
def conformance_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from using_engine(request, monkeypatch)
