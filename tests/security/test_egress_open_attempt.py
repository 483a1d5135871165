"""Attack pass 6: the egress proxy writes an attempt to the record only when its connection
ends. A process a call leaves running (the container engines keep them) holds a tunnel to a
listed host open: meanwhile ``workspace status`` shows no attempt at all, and when the proxy
is stopped with the container (commit, discard, a new container) the attempt, and what it
sent, are never recorded. Every attempt is to be on the record, as it is made."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from manager.engines import procs
from tests.claude.conftest import Claude
from tests.engines.conftest import engine_cli
from tests.engines.conftest import engine_name  # noqa: F401 - the fixture
from tests.engines.support import allow_hosts
from tests.engines.test_network import Server
from tests.engines.test_network import server  # noqa: F401 - the fixture

HOLD = """setsid nohup python3 - >/dev/null 2>&1 <<'EOF' &
import socket, time
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(b"CONNECT 127.0.0.2:{port} HTTP/1.1\\r\\n\\r\\n")
s.recv(100)
s.sendall(b"GET / HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 100000\\r\\n\\r\\n" + b"S" * 50000)
time.sleep(120)
EOF
sleep 2; echo held
"""


@pytest.mark.parametrize("engine_name", ["podman", "docker"], indirect=True)
def test_an_open_connection_is_on_the_record(
        engine_name: str, ws, tmp_path: Path, project: Path, server: Server):  # noqa: F811
    allow_hosts(tmp_path, [f"127.0.0.2:{server.port}"])
    claude = Claude(project, tmp_path, engine=engine_cli(engine_name))
    claude.start()
    assert claude.bash(HOLD.format(port=server.port)).stdout.startswith("held")
    time.sleep(1)
    network = json.loads(ws("status", "--json", check=True).stdout)["network"]
    assert network["attempts"] == 1, network
    [attempt] = network["record"]
    assert (attempt["open"], attempt["call"]) == (True, "toolu_0001"), attempt
    # The proxy stops (as commit and discard stop it): it closes what it holds, with the
    # bytes so far.
    sandbox = tmp_path / "state/workspace/sessions/sess-1/sandbox"
    proxy = int((sandbox / "egress.pid").read_text().split()[0])
    os.kill(proxy, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while procs.state(proxy) not in (None, "Z") and time.monotonic() < deadline:
        time.sleep(0.02)
    network = json.loads(ws("status", "--json", check=True).stdout)["network"]
    [attempt] = network["record"]
    assert (attempt["open"], attempt["error"]) == (False, "the proxy stopped"), attempt
    assert attempt["up"] >= 50000, attempt
