"""The engine names the tests use come from the one table (manager/engines/registry.py)."""

from __future__ import annotations

from manager.commands import image
from manager.engines import registry
from tests.engines.conftest import CONTAINER_ENGINES
from tests.engines.conftest import ENGINES
from tests.engines.conftest import VOLUME_SUFFIX
from tests.engines.conftest import engine_cli


def test_the_behaviour_suite_runs_every_engine_of_the_table():
    assert {engine_cli(name) for name in ENGINES} == set(registry.ENGINES)


def test_the_table_holds_every_choice_of_the_setting_in_autos_order():
    assert (registry.AUTO, *registry.ENGINES) == registry.CHOICES
    assert tuple(registry.ENGINES) == registry.AUTO_ORDER


def test_volume_mode_is_run_for_container_engines_only():
    volume = {engine_cli(name) for name in ENGINES if name.endswith(VOLUME_SUFFIX)}
    assert volume and volume <= CONTAINER_ENGINES == set(registry.CONTAINER_ENGINES)


def test_image_builds_for_the_container_engines_of_the_table():
    assert set(image.ENGINES) == set(registry.CONTAINER_ENGINES)
    assert set(registry.CONTAINER_ENGINES) < set(registry.CHOICES)
