"""Shared by the commit-side security tests: the engines that commit from an upper dir.

The try engine commits through ``try commit`` semantics of its own upper dir too, but
its sandbox layout differs; these tests cover the engines the issue names: overlay,
docker and podman (host and volume modes).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any

import pytest

from tests.engines.conftest import using_engine

COMMIT_ENGINES = ["overlay", "podman", "docker", "docker-volume"]


@pytest.fixture(params=COMMIT_ENGINES)
def commit_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                  ) -> Iterator[str]:
    yield from using_engine(request, monkeypatch)


def changes(ws: Callable[..., Any]) -> dict[str, dict[str, Any]]:
    """``workspace status --json`` as {path: change record}."""
    proc = ws("status", "--json", check=True)
    return {c["path"]: c for c in json.loads(proc.stdout)["changes"]}


def commit_json(ws: Callable[..., Any], *args: str) -> tuple[int, dict[str, Any]]:
    proc = ws("commit", "--json", *args)
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def sandbox_inodes() -> set[tuple[int, int]]:
    """(dev, ino) of every non-directory left in any session's sandbox (upper dirs and all)."""
    import os

    from manager.session import store

    found = set()
    sessions, _ = store.list_sessions()
    for session in sessions:
        for top, _dirs, files in os.walk(session.sandbox):
            for name in files:
                try:
                    st = os.lstat(os.path.join(top, name))
                except OSError:
                    continue
                found.add((st.st_dev, st.st_ino))
    return found


def assert_unshared(*real: Any) -> None:
    """No real file shares its inode with anything a sandbox still holds."""
    import os

    left = sandbox_inodes()
    for path in real:
        st = os.lstat(path)
        assert (st.st_dev, st.st_ino) not in left, f"{path} shares its inode with the sandbox"
