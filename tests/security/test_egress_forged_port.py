"""Attack pass 6: a sandboxed process that connects to the container engines' proxy socket
itself and names a port no connection holds (``WSFWD 1``) makes its attempt the call of no
one: the record says "" (a command left running) for an attempt the live call made. The
forwarder's word is trusted from any peer; the peer's own pid (SO_PEERCRED), which would
name the call, is read only when no port is given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import engine_cli
from tests.engines.conftest import engine_name  # noqa: F401 - the fixture
from tests.engines.support import allow_hosts
from tests.engines.test_network import Server
from tests.engines.test_network import server  # noqa: F401 - the fixture

FORGED = """python3 - <<'EOF'
import socket
s = socket.socket(socket.AF_UNIX)
s.connect("/run/ws-egress/proxy.sock")
s.sendall(b"WSFWD 1\\nCONNECT {host}:{port} HTTP/1.1\\r\\n\\r\\n")
print("forged:", s.recv(100).split(b"\\r\\n")[0].decode())
EOF
"""


@pytest.mark.parametrize("engine_name", ["podman", "docker"], indirect=True)
def test_a_forged_forwarder_word_does_not_hide_the_call(
        engine_name: str, ws, tmp_path: Path, project: Path, server: Server):  # noqa: F811
    allow_hosts(tmp_path, [f"127.0.0.2:{server.port}"])
    claude = Claude(project, tmp_path, engine=engine_cli(engine_name))
    claude.start()
    refused = claude.bash(FORGED.format(host="unlisted.invalid", port=server.port))
    assert refused.stdout.split("\n")[:1] == ["forged: HTTP/1.1 403 Forbidden"], refused
    allowed = claude.bash(FORGED.format(host="127.0.0.2", port=server.port))
    assert allowed.stdout.split("\n")[:1] == ["forged: HTTP/1.1 200 Connection established"], allowed
    record = tmp_path / "state/workspace/sessions/sess-1/sandbox/egress.jsonl"
    calls = {(e["host"], e["call"]) for e in map(json.loads, record.read_text().splitlines())}
    assert calls == {("unlisted.invalid", "toolu_0001"), ("127.0.0.2", "toolu_0002")}, calls
