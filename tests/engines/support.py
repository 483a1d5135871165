"""Helpers shared by the engine test modules."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any


def status(ws: Callable[..., Any], *args: str) -> dict[str, str]:
    """``workspace status --json`` as {path: kind}."""
    proc = ws("status", "--json", *args, check=True)
    return {c["path"]: c["kind"] for c in json.loads(proc.stdout)["changes"]}


def wait_until(predicate: Callable[[], object], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.05)
