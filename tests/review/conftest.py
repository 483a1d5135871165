"""Review tests run the real CLI over the built-in overlay engine and real git repositories."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _on_overlay(overlay_engine: str) -> None:
    """Every test here runs on the built-in overlay engine (the root conftest's fixture)."""
