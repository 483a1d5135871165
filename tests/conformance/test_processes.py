"""A server an agent starts in one call (Claude's run_in_background), seen from the next call.

What docs/fidelity.md#processes promises, per engine: overlay and try give each call a pid
namespace of its own, so a later call cannot pgrep or kill the server; it reaches it over
the network (shared), and the server stops when its call is killed (KillShell). In the
container engines every call runs in the session's container: a later call finds it with
pgrep and stops it with kill.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.engines.conftest import CONTAINER_ENGINES
from tests.engines.conftest import engine_cli

pytestmark = pytest.mark.as_user

SERVER = ("import socket, sys; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(4); "
          "open(sys.argv[1], 'w').write(str(s.getsockname()[1])); "
          "[c.sendall(b'up') or c.close() for c, _ in iter(s.accept, None)]")


def _free_name() -> str:
    return f"wsconf-server-{uuid.uuid4().hex[:8]}"


def _call(project: Path, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "manager", "run", "-c", command], cwd=project,
                          capture_output=True, text=True, timeout=120)


def _wait_for_port(project: Path, port_file: str, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc = _call(project, f"cat {port_file} 2>/dev/null")
        if proc.stdout.strip().isdigit():
            return int(proc.stdout)
        time.sleep(0.2)
    raise AssertionError("the server never wrote its port")


# try runs one call at a time per sandbox: a later call waits for the server's call to end
# (docs/fidelity.md#processes).
@pytest.mark.parametrize("conformance_engine", ["overlay", "podman", "docker"], indirect=True)
def test_a_background_server_from_an_earlier_call(project: Path, conformance_engine: str):
    name = _free_name()
    port_file = f"{name}.port"   # in the project: every engine shows it to later calls
    _call(project, "true")       # the session first, so the server's call only starts it
    background = subprocess.Popen(
        [sys.executable, "-m", "manager", "run", "-c",
         f"exec -a {name} python3 -c \"{SERVER}\" {port_file}"], cwd=project)
    try:
        port = _wait_for_port(project, port_file)
        found = _call(project, f"pgrep -f '^{name}'")
        if engine_cli(conformance_engine) in CONTAINER_ENGINES:
            assert found.returncode == 0, found.stderr
            killed = _call(project, f"kill {found.stdout.split()[0]}")
            assert killed.returncode == 0, killed.stderr
            assert background.wait(timeout=30) != 0
            return
        assert found.returncode == 1, "a later call sees another call's processes: update the docs"
        reached = _call(project, "python3 -c \"import socket, sys; s = socket.create_connection("
                                 f"('127.0.0.1', {port})); print(s.recv(2).decode())\"")
        assert reached.stdout == "up\n", reached.stderr
        with socket.create_connection(("127.0.0.1", port)) as s:
            assert s.recv(2) == b"up"   # natively too: the network is the host's
        background.terminate()          # what KillShell does
        background.wait(timeout=30)
        time.sleep(0.5)
        assert subprocess.run(["pgrep", "-f", f"^{name}"], capture_output=True).returncode == 1
    finally:
        if background.poll() is None:
            background.kill()
            background.wait()
        subprocess.run(["pkill", "-f", f"^{name}"], capture_output=True)
