"""Attack pass 9 (lesser): pass 8 gave a request head 10 s, so junk connections no longer hold
the proxy's 64 slots and turn later attempts into a count. An *allowed* tunnel has no such
bound, nor any idle one: a process a call left running opens 64 CONNECTs to a listed host
(any server that keeps an idle connection: here the test's HTTP server, which waits for a
request) and sends nothing. Every later proxy attempt of any call, a refused host included,
is then one ``via: limit`` count with no host and no call: the agent's attempts to reach an
unlisted host are not on the record by name. Rule: every attempt is recorded (host, call):
past the bound, a connection closes the oldest and takes its slot (holder/live.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import engine_cli
from tests.engines.conftest import engine_name  # noqa: F401 - the fixture
from tests.engines.support import allow_hosts
from tests.engines.test_network import Server
from tests.engines.test_network import server  # noqa: F401 - the fixture

HOLD = """setsid nohup python3 - >/dev/null 2>&1 <<'EOF' &
import socket, time
held = []
for _ in range(64):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT 127.0.0.2:{port} HTTP/1.1\\r\\n\\r\\n")
    s.recv(100)
    held.append(s)
time.sleep(30)
EOF
sleep 3; echo held
"""
REFUSED = """python3 - <<'EOF'
import socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(b"CONNECT unlisted.invalid:443 HTTP/1.1\\r\\n\\r\\n")
print("answer", s.recv(100).split(b"\\r\\n")[0].decode() or "closed")
EOF
"""


@pytest.mark.parametrize("engine_name", ["docker"], indirect=True)
def test_held_allowed_tunnels_do_not_hide_later_attempts(
        engine_name: str, tmp_path: Path, project: Path, server: Server):  # noqa: F811
    allow_hosts(tmp_path, [f"127.0.0.2:{server.port}"])
    claude = Claude(project, tmp_path, engine=engine_cli(engine_name))
    claude.start()
    assert "held" in claude.bash(HOLD.replace("{port}", str(server.port))).stdout
    out = claude.bash(REFUSED)
    time.sleep(1)
    record = tmp_path / "state/workspace/sessions/sess-1/sandbox/egress.jsonl"
    entries = [json.loads(line) for line in record.read_text().splitlines()]
    hosts = {e["host"] for e in entries}
    assert "unlisted.invalid" in hosts, (out.stdout, [e for e in entries if e["host"] != "127.0.0.2"])
