"""Attack pass 8: a NUL in the host name gets past a ``*.domain`` entry of the allow list.

The proxy checks the host as a Python string (``allowed``: ``*.example.com`` takes any name
ending in ``.example.com``), then connects with ``socket.create_connection((host, port))``,
whose getaddrinfo gets a C string: the name ends at the first NUL. ``CONNECT
127.0.0.2\\0.example.com:PORT`` (or a SOCKS5 domain with a NUL) is allowed as a subdomain of
example.com and connects to 127.0.0.2, a host not listed; any host works the same way
(``evil.invalid\\0.example.com``). Rule broken: with a list, only the listed hosts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import engine_cli
from tests.engines.conftest import engine_name  # noqa: F401 - the fixture
from tests.engines.support import allow_hosts
from tests.engines.test_network import GREETING
from tests.engines.test_network import Server
from tests.engines.test_network import server  # noqa: F401 - the fixture

NUL_CONNECT = """python3 - <<'EOF'
import socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(b"CONNECT 127.0.0.2\\x00.example.com:{port} HTTP/1.1\\r\\n\\r\\n")
print("answer:", s.recv(100).split(b"\\r\\n")[0].decode())
s.sendall(b"GET / HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n")
print("body:", s.recv(1000).decode(errors="replace").splitlines()[-1])
EOF
"""


@pytest.mark.parametrize("engine_name", ["overlay", "docker"], indirect=True)
def test_a_nul_in_the_host_does_not_pass_a_listed_domain(
        engine_name: str, tmp_path: Path, project: Path, server: Server):  # noqa: F811
    allow_hosts(tmp_path, ["*.example.com"])
    claude = Claude(project, tmp_path, engine=engine_cli(engine_name))
    claude.start()
    run = claude.bash(NUL_CONNECT.format(port=server.port))
    assert GREETING not in run.stdout, run.stdout
    assert "200" not in run.stdout.splitlines()[0], run.stdout
