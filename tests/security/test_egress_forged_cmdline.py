"""Attack pass 8: on the overlay engine the egress record names the call from the command line
of the connecting process and its ancestors, which the process writes itself.

``egress_proxy._call_of`` takes the first process (the socket's owner first, then its ancestors)
whose argv[1] ends with ``/overlay/enter.sh`` and reads the call from argv[6] (``ID.cwd``).
A sandboxed command runs a program with exactly that argv (python3 runs a script at a path that
ends so) and its attempt is recorded under any call id it names (an earlier call's, one that
never was) or under none ("" for argv[6] without ``.cwd``): the docstring's "its ancestry, not
its environment: a command cannot claim another call's id" does not hold. Rule broken: every
attempt is recorded against the call that made it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.support import allow_hosts
from tests.engines.test_network import Server
from tests.engines.test_network import server  # noqa: F401 - the fixture

FORGE = """mkdir -p /tmp/forge/overlay && cat > /tmp/forge/overlay/enter.sh <<'EOF'
import socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(b"CONNECT {host}:{port} HTTP/1.1\\r\\n\\r\\n")
print("forged:", s.recv(100).split(b"\\r\\n")[0].decode())
EOF
python3 /tmp/forge/overlay/enter.sh a b c d {claim}
"""


@pytest.mark.usefixtures("overlay_engine")
def test_a_command_line_cannot_name_another_call(ws, tmp_path: Path, project: Path,
                                                 server: Server):  # noqa: F811
    allow_hosts(tmp_path, [f"127.0.0.2:{server.port}"])
    claude = Claude(project, tmp_path)
    claude.start()
    assert claude.bash("true").returncode == 0                      # toolu_0001, over
    one = claude.bash(FORGE.format(host="unlisted.invalid", port=server.port, claim="toolu_0001.cwd"))
    two = claude.bash(FORGE.format(host="127.0.0.2", port=server.port, claim="nobody"))
    assert "forged: HTTP/1.1 403" in one.stdout and "forged: HTTP/1.1 200" in two.stdout, (one, two)
    record = tmp_path / "state/workspace/sessions/sess-1/sandbox/egress.jsonl"
    calls = {(e["host"], e["call"]) for e in map(json.loads, record.read_text().splitlines())
             if "host" in e}
    assert calls == {("unlisted.invalid", "toolu_0002"), ("127.0.0.2", "toolu_0003")}, calls
