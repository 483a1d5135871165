"""What the review-then-commit tests share (test_review_then_commit*.py): a session on each
container engine and mode (they keep a call's background processes), and the signal given,
from outside any call, to a process a call left running, which then writes after the review.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.engines.conftest import using_engine


@pytest.fixture(params=["docker", "podman", "docker-volume", "podman-volume"])
def container_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                     ) -> Iterator[str]:
    yield from using_engine(request, monkeypatch)


def in_container(cli: str, *argv: str) -> subprocess.CompletedProcess[bytes]:
    """``argv`` run in the (only) session's container by the engine, not by a call."""
    from manager.engines.container.base import container_of
    from manager.session import store

    sessions, _ = store.list_sessions()
    return subprocess.run([cli, "exec", container_of(sessions[0]), *argv],
                          capture_output=True, timeout=60, check=False)


def release(cli: str, done: str, deadline: float | None = None,
            what: str = "the background process never wrote") -> None:
    """Touch /dev/shm/go in the container, then wait until the process made ``done``
    (by ``deadline``, a monotonic time; default 30 s from now)."""
    deadline = time.monotonic() + 30 if deadline is None else deadline
    in_container(cli, "touch", "/dev/shm/go")
    while in_container(cli, "test", "-e", done).returncode != 0:
        assert time.monotonic() < deadline, what
        time.sleep(0.05)
