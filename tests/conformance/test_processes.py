"""A server an agent starts in one call (Claude's run_in_background), seen from the next call.

What docs/fidelity.md#processes promises, per engine: overlay runs every call of a session
in the session's pid namespace and the container engines in the session's container, so a
later call finds the server with pgrep and stops it with kill, and stopping the call that
started it (KillShell) stops it too. try gives each call a pid namespace of its own.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.as_user

SERVER = ("import socket, sys; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(4); "
          "open(sys.argv[1], 'w').write(str(s.getsockname()[1])); "
          "[c.sendall(b'up') or c.close() for c, _ in iter(s.accept, None)]")


def _free_name() -> str:
    return f"wsconf-server-{uuid.uuid4().hex[:8]}"


def _pattern(name: str) -> str:
    """Matches the server's command line (its port file's name) but not a shell that runs
    pgrep with it; `exec -a` alone is not enough: a pyenv shim re-executes python."""
    return f"[{name[0]}]{name[1:]}[.]port"


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
        found = _call(project, f"pgrep -f '{_pattern(name)}'")
        assert found.returncode == 0, found.stderr
        reached = _call(project, "python3 -c \"import socket, sys; s = socket.create_connection("
                                 f"('127.0.0.1', {port})); print(s.recv(2).decode())\"")
        assert reached.stdout == "up\n", reached.stderr
        killed = _call(project, f"kill {found.stdout.split()[0]}")
        assert killed.returncode == 0, killed.stderr
        assert background.wait(timeout=30) != 0
    finally:
        if background.poll() is None:
            background.kill()
            background.wait()
        subprocess.run(["pkill", "-f", _pattern(name)], capture_output=True)


@pytest.mark.parametrize("conformance_engine", ["overlay"], indirect=True)
def test_stopping_the_call_stops_its_server(project: Path, conformance_engine: str):
    """What KillShell does: the call's process tree ends, the session's pid namespace stays."""
    name = _free_name()
    port_file = f"{name}.port"
    _call(project, "true")
    background = subprocess.Popen(
        [sys.executable, "-m", "manager", "run", "-c",
         f"exec -a {name} python3 -c \"{SERVER}\" {port_file}"], cwd=project)
    try:
        port = _wait_for_port(project, port_file)
        with socket.create_connection(("127.0.0.1", port)) as s:
            assert s.recv(2) == b"up"   # natively too: the network is the host's
        background.terminate()
        background.wait(timeout=30)
        deadline = time.monotonic() + 10
        while subprocess.run(["pgrep", "-f", _pattern(name)], capture_output=True).returncode == 0:
            assert time.monotonic() < deadline, "the server outlived its call"
            time.sleep(0.2)
        assert _call(project, "echo still here").stdout == "still here\n"
    finally:
        if background.poll() is None:
            background.kill()
            background.wait()
        subprocess.run(["pkill", "-f", _pattern(name)], capture_output=True)
