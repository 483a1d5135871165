"""The docker daemon stopped mid-session: a clear error, nothing lost, recovery after."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from tests.engines.support import status
from tests.engines.support import wait_until

pytestmark = [pytest.mark.engine, pytest.mark.slow,
              pytest.mark.parametrize("engine_name", ["docker"], indirect=True)]


def _dockerd_pid() -> int | None:
    """The host's dockerd: the one its default pidfile names (the remote-engine tests run a
    second one, with a pidfile of its own), else the only one."""
    try:
        pid = int(Path("/var/run/docker.pid").read_text().strip())
        if psutil.Process(pid).name() == "dockerd":
            return pid
    except (OSError, ValueError, psutil.Error):
        pass
    pids = [p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "dockerd"]
    return pids[0] if len(pids) == 1 else None


@pytest.mark.needs_root   # stops the host's dockerd
@pytest.mark.alone        # ... which every other docker test, of either account, needs
def test_daemon_stopped_mid_session(ws, project: Path, engine_name: str):
    if not (os.environ.get("CI") or os.environ.get("WS_TEST_STOP_DOCKERD")):
        pytest.skip("stops the host's dockerd: set WS_TEST_STOP_DOCKERD=1 (CI does)")
    pid = _dockerd_pid()
    if pid is None or os.getuid() != 0:
        pytest.skip("needs root and one dockerd to stop")
    ws("run", "--", "sh", "-c", "echo before > before.txt", check=True)
    os.kill(pid, signal.SIGTERM)
    try:
        wait_until(lambda: not psutil.pid_exists(pid), timeout=60)
        proc = ws("run", "--", "sh", "-c", "echo lost > lost.txt")
        assert proc.returncode != 0
        assert "safe" in proc.stderr and "docker" in proc.stderr, proc.stderr
        assert status(ws) == {str(project / "before.txt"): "added"}
    finally:
        _restart_dockerd()
    out = ws("run", "--", "sh", "-c", "cat before.txt; echo after > after.txt", check=True)
    assert out.stdout == "before\n"
    assert set(status(ws)) == {str(project / "before.txt"), str(project / "after.txt")}


def _restart_dockerd() -> None:
    """Exactly as setup does (it starts dockerd when `docker info` does not answer)."""
    setup = Path(__file__).resolve().parents[2] / "scripts/setup.d/30-containers.sh"
    subprocess.run(["bash", str(setup)], env=dict(os.environ, WORKSPACE_SKIP_IMAGES="1"),
                   check=True, capture_output=True)
