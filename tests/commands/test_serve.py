"""``workspace serve``: one per user, gone when idle or told to go, its endpoint withdrawn."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.as_user   # the lock, the modes and the signals are the user's too


def _endpoint() -> Path:
    return Path(os.environ["XDG_STATE_HOME"]) / "workspace" / "service" / "endpoint"


def _started(idle: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "manager", "serve", "--idle", idle])
    deadline = time.monotonic() + 30
    while not _endpoint().exists():
        assert proc.poll() is None and time.monotonic() < deadline, "workspace serve did not start"
        time.sleep(0.02)
    return proc


def test_one_service_and_it_withdraws_its_endpoint(ws: Any) -> None:
    assert "not running" in ws("serve", "--status", check=True).stdout
    proc = _started("600")
    try:
        assert "listening on 127.0.0.1:" in ws("serve", "--status", check=True).stdout
        second = ws("serve", check=True, timeout=20)      # returns at once: one per user
        assert "already running" in second.stdout
        assert (_endpoint().stat().st_mode & 0o777, _endpoint().parent.stat().st_mode & 0o777) \
            == (0o600, 0o700)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert not _endpoint().exists()
        assert "not running" in ws("serve", "--status", check=True).stdout
    finally:
        proc.kill()
        proc.wait()


def test_an_idle_service_exits() -> None:
    proc = _started("0.3")
    try:
        assert proc.wait(timeout=10) == 0
        assert not _endpoint().exists()
    finally:
        proc.kill()
        proc.wait()
