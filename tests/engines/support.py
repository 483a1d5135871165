"""Helpers shared by the engine test modules."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
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


def allow_hosts(tmp_path: Path, hosts: list[str], more: str = "") -> None:
    """The user's configuration (the ``isolated_state`` fixture's XDG_CONFIG_HOME below
    ``tmp_path``): setting ``network`` the list ``hosts``, and ``more`` YAML lines."""
    path = tmp_path / "config/workspace/config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"network: {hosts!r}\n{more}")
