"""Attack pass 9: the container proxy's hand-over (``WSFWD direct TOKEN`` + SCM_RIGHTS,
holder/direct_attach.receive) turns every passed descriptor into a socket object before it
checks the token. A descriptor that is not a socket (a pipe's end, any file) makes
``socket.socket(fileno=fd)`` raise ENOTSOCK: the exception leaves ``receive`` with the
descriptor still open in the host's proxy. A sandboxed call that reaches
``/run/ws-egress/proxy.sock`` (network a list) grows the proxy by one descriptor per
connection, without any token; at the proxy's RLIMIT_NOFILE its accept fails (EMFILE, in a
busy loop: the listener stays readable) and the record can no longer be written: attempts
go unrecorded, the listed hosts are unreachable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import engine_cli
from tests.engines.conftest import engine_name  # noqa: F401 - the fixture

FLOOD = """python3 - <<'EOF'
import os, socket
sent = 0
for _ in range(300):
    r, w = os.pipe()
    s = socket.socket(socket.AF_UNIX)
    s.connect("/run/ws-egress/proxy.sock")
    socket.send_fds(s, [b"WSFWD direct not-the-token\\n"], [r])
    s.recv(100)
    s.close(); os.close(r); os.close(w)
    sent += 1
print("sent", sent)
EOF
"""


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _listed_session(engine: str, tmp_path: Path, project: Path) -> tuple[Claude, Path, int]:
    """A session with a network list after its first call: it, its sandbox, its proxy's pid."""
    path = tmp_path / "config/workspace/config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("network: ['allowed.invalid:443']\n")
    claude = Claude(project, tmp_path, engine=engine_cli(engine))
    claude.start()
    assert claude.bash("true").returncode == 0
    sandbox = tmp_path / "state/workspace/sessions/sess-1/sandbox"
    return claude, sandbox, int((sandbox / "egress.pid").read_text().split()[0])


@pytest.mark.parametrize("engine_name", ["podman", "docker"], indirect=True)
def test_a_handover_of_a_non_socket_does_not_grow_the_proxy(
        engine_name: str, tmp_path: Path, project: Path):  # noqa: F811
    claude, _, proxy = _listed_session(engine_name, tmp_path, project)
    before = _fds(proxy)
    out = claude.bash(FLOOD)
    assert "sent 300" in out.stdout, out
    after = _fds(proxy)
    assert after - before < 20, f"the host's proxy holds {after - before} more descriptors"


REFUSED = """python3 - <<'EOF'
import socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=15)
s.sendall(b"CONNECT unlisted.invalid:443 HTTP/1.1\\r\\n\\r\\n")
try: print("proxy", s.recv(100).split(b"\\r\\n")[0].decode() or "closed")
except OSError as e: print("proxy", e)
s = socket.socket(); s.settimeout(5)
try: s.connect(("192.0.2.1", 4444))
except OSError as e: print("direct errno", e.errno)
EOF
"""


@pytest.mark.parametrize("engine_name", ["podman", "docker"], indirect=True)
def test_a_proxy_out_of_descriptors_still_records(
        engine_name: str, ws, tmp_path: Path, project: Path):  # noqa: F811
    """The proxy's descriptor limit lowered to what the flood reaches (20000 here otherwise,
    the same end with more pipes): later attempts must still be refused *and recorded*."""
    import json
    import subprocess

    claude, sandbox, proxy = _listed_session(engine_name, tmp_path, project)
    subprocess.run(["prlimit", f"--pid={proxy}", f"--nofile={_fds(proxy) + 250}"], check=True)
    claude.bash(FLOOD)
    out = claude.bash(REFUSED)
    record = sandbox / "egress.jsonl"
    entries = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    seen = {(e["host"], e.get("via")) for e in entries}
    assert "unlisted.invalid" in {h for h, _ in seen} and \
        "192.0.2.1" in {h for h, _ in seen}, (out, entries)
