"""Attack pass 7: the HTTP method of a plain proxy request is recorded as the sandbox sent it
(the request line's first word: any bytes but space and CRLF, so ESC, BEL, a lone newline) and
``workspace status --network`` prints it unquoted (egress/record.py ``describe``: ``what``).
Pass 6 quoted the host, query, error and call id, not the method. A method of
``ESC [ 1 A  ESC [ 2 K  \\r`` erases the line that says REFUSED and writes a line of the
sandbox's own words in its place (here: ``allowed pypi.org:443``); an OSC sets the terminal's
title. The record must show every attempt as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engines.support import allow_hosts
from tests.engines.test_network import Server
from tests.engines.test_network import server  # noqa: F401 - the fixture

pytestmark = pytest.mark.as_user

METHOD = b"X\x1b]0;title\x07\n\x1b[1A\x1b[2K\rFORGED\x1b[Callowed\x1b[Cpypi.org:443"
PLAIN = """python3 - <<'EOF'
import socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
s.sendall({method!r} + b" http://evil.example/ HTTP/1.1\\r\\nHost: evil.example\\r\\n\\r\\n")
print(s.recv(12).decode())
EOF
"""



def test_a_methods_control_characters_do_not_reach_the_record(ws, tmp_path: Path, project: Path,
                                                               server: Server):  # noqa: F811
    allow_hosts(tmp_path, [f"127.0.0.2:{server.port}"], "engine: overlay\n")
    proc = ws("run", "--cwd", str(project), "-c", PLAIN.format(method=METHOD), check=True)
    assert proc.stdout.split() == ["HTTP/1.1", "403"], proc.stdout   # refused: not listed
    for argv in (["status", "--no-pager"], ["status", "--network"]):
        shown = ws(*argv, check=True).stdout
        forged = [line for line in shown.splitlines() if "FORGED" in line and "REFUSED" not in line]
        assert ("\x1b" not in shown and "\r" not in shown and "\x07" not in shown
                and not forged), (argv, shown)
