"""Attack pass 6: the host a sandboxed command names to the egress proxy (a SOCKS5 domain:
any bytes; an HTTP CONNECT target: any but space) is printed as it is by ``workspace
status`` (the review), ``status --network`` and the Stop hook's context. A name of control
characters then drives the user's terminal: ``ESC [ 1 ; 1 r`` (lower case survives the
proxy's lowering) confines all the output after it, the list of changes included, to one
scrolling line, so the review shows none of them; ``\\r`` and newlines forge lines. File
names are quoted for this reason (ui.quote); the record's hosts must be too. (Plain
``status`` goes through ui's sink, which escapes ESC and CR but keeps the newline: a forged
line; ``status --network`` prints them raw.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engines.support import allow_hosts
from tests.engines.test_network import Server
from tests.engines.test_network import server  # noqa: F401 - the fixture

pytestmark = pytest.mark.as_user

HOST = "\x1b[1;1r\r\nnothing pending: the sandbox holds no changes\n"
SOCKS = """printf 'changed\\n' > changed.txt
python3 - <<'EOF'
import socket
host = {host!r}.encode()
s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
s.sendall(bytes([5, 1, 0]))
s.recv(2)
s.sendall(bytes([5, 1, 0, 3, len(host)]) + host + (443).to_bytes(2, "big"))
print("reply", s.recv(10)[1])
EOF
"""



def test_a_hosts_control_characters_do_not_reach_the_review(ws, tmp_path: Path, project: Path,
                                                              server: Server):  # noqa: F811
    allow_hosts(tmp_path, [f"127.0.0.2:{server.port}"], "engine: overlay\n")
    proc = ws("run", "--cwd", str(project), "-c", SOCKS.format(host=HOST), check=True)
    assert proc.stdout.splitlines() == ["reply 2"], proc.stdout   # refused: not listed
    for argv in (["status", "--no-pager"], ["status", "--network"]):
        shown = ws(*argv, check=True).stdout
        # Plain status keeps the host's newline: a line of the sandbox's own words.
        forged = [line for line in shown.splitlines() if line.startswith("nothing pending")]
        assert ("\x1b" not in shown and "\r" not in shown and not forged), (argv, shown)
