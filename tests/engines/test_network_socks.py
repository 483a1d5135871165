"""SOCKS5 through the session's proxy (issue 24): with ``network`` a list, ALL_PROXY names
the proxy's port as socks5h; a listed host answers through it, others are refused with
SOCKS5's "not allowed by ruleset", and every request is on the record."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engines.test_network import GREETING
from tests.engines.test_network import Server

UDP_ASSOCIATE = """python3 - <<'EOF'
import socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
s.sendall(bytes([5, 1, 0]))
print("method", s.recv(2).hex())
s.sendall(bytes([5, 3, 0, 1, 192, 0, 2, 5, 0, 53]))
print("associate", s.recv(10)[1])
EOF
"""


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def test_socks5_connect_through_the_list(ws, tmp_path: Path, server: Server):
    path = tmp_path / "config/workspace/config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"engine: overlay\nnetwork: ['127.0.0.2:{server.port}']\n")
    url = f"http://127.0.0.2:{server.port}/"
    proc = ws("run", "-c", f"echo all=$ALL_PROXY; curl -s --proxy \"$ALL_PROXY\" {url}; echo; "
                           f"curl -s --socks5 127.0.0.1:3128 {url}; echo; "
                           f"curl -s --proxy \"$ALL_PROXY\" http://refused.invalid:{server.port}/; "
                           "echo rc=$?\n" + UDP_ASSOCIATE, check=True)
    lines = proc.stdout.splitlines()
    assert lines[:3] == ["all=socks5h://127.0.0.1:3128", GREETING, GREETING], proc.stdout
    assert lines[3] in ("rc=97", "rc=7"), proc.stdout        # curl: the proxy refused
    assert lines[4:] == ["method 0500", "associate 7"], proc.stdout   # CONNECT only

    network = json.loads(ws("status", "--json", check=True).stdout)["network"]
    socks = [e for e in network["record"] if e["method"] == "SOCKS5"]
    assert sorted((e["host"], e["allowed"]) for e in socks) == [
        ("127.0.0.2", True), ("127.0.0.2", True), ("192.0.2.5", False),
        ("refused.invalid", False)], socks
    assert all(e["down"] > len(GREETING) for e in socks if e["allowed"])
