"""Setting ``network`` a list on the podman and docker engines (issue 24): the container has
no route out (``--network none``, even with ``container.network: true``); calls reach the
listed hosts only through the session's proxy on the host (a unix socket mounted read-only,
a forwarder on 127.0.0.1:3128 inside), and every attempt is on the record with its call.

The test server listens on the host's 127.0.0.2: inside the container that address is the
container's own loopback, so only the proxy reaches the server.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import engine_cli
from tests.engines.test_network import GREETING
from tests.engines.test_network import Server
from tests.engines.test_network import server  # noqa: F401 - the fixture

FETCH = """python3 - <<'EOF'
import urllib.request
for url in {urls!r}:
    try:
        print(urllib.request.urlopen(url, timeout=10).read().decode())
    except Exception as exc:
        print("failed", getattr(exc, "code", exc))
EOF
"""
# Around the forwarder, straight to the proxy's socket: the same list and record.
SOCKET = """python3 - <<'EOF'
import socket
s = socket.socket(socket.AF_UNIX)
s.connect("/run/ws-egress/proxy.sock")
s.sendall(b"CONNECT refused-host.invalid:{port} HTTP/1.1\\r\\n\\r\\n")
print("socket:", s.recv(100).split(b"\\r\\n")[0].decode())
try:
    open("/run/ws-egress/other", "w")
except OSError as exc:
    print("write:", exc.strerror)
EOF
"""
DIRECT = """python3 - <<'EOF'
import socket
try:
    socket.create_connection(("127.0.0.2", {port}), timeout=3).close()
    print("direct: reached")
except OSError as exc:
    print("direct: failed")
print(sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]))
EOF
"""


@pytest.mark.parametrize("engine_name", ["podman", "docker", "docker-volume"], indirect=True)
def test_a_list_goes_through_the_proxy_with_each_call_on_the_record(
        engine_name: str, ws, tmp_path: Path, project: Path, server: Server):  # noqa: F811
    path = tmp_path / "config/workspace/config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"network: ['127.0.0.2:{server.port}']\ncontainer:\n  network: true\n")
    claude = Claude(project, tmp_path, engine=engine_cli(engine_name))
    claude.start()
    url = f"http://127.0.0.2:{server.port}/"

    allowed = claude.bash("echo $HTTP_PROXY $ALL_PROXY; " + FETCH.format(urls=[url]))
    assert allowed.stdout.split("\n")[:2] == [
        "http://127.0.0.1:3128 socks5h://127.0.0.1:3128", GREETING], allowed
    # The call is the host's word: a nested ws-exec naming another id claims nothing.
    refused = claude.bash(FETCH.format(urls=[f"http://refused-host.invalid:{server.port}/"])
                          + SOCKET.format(port=server.port) + "ws-exec --id forged -- "
                          + FETCH.format(urls=[f"http://refused-host.invalid:{server.port}/"]))
    assert refused.stdout.split("\n")[:4] == [
        "failed 403", "socket: HTTP/1.1 403 Forbidden", "write: Read-only file system",
        "failed 403"], refused
    direct = claude.bash(DIRECT.format(port=server.port))
    # lo, and the watched pair (test_network_containers_direct.py): no way out.
    assert direct.stdout.split("\n")[:2] == ["direct: failed", "['lo', 'ws0', 'ws1']"], direct

    network = json.loads(ws("status", "--json", check=True).stdout)["network"]
    assert (network["mode"], network["attempts"], network["refused"]) == ("list", 4, 3), network
    first, second = network["hosts"]
    assert (first["host"], first["allowed"], first["count"], first["calls"]) == \
        ("refused-host.invalid", False, 3, ["toolu_0002"]), network["hosts"]
    assert (second["host"], second["allowed"], second["calls"]) == \
        ("127.0.0.2", True, ["toolu_0001"]), network["hosts"]
    assert second["down"] > len(GREETING)
    stop = claude.hook("Stop", {"stop_hook_active": False}).json
    assert "refused-host.invalid" in stop["hookSpecificOutput"]["additionalContext"]

    # The proxy dies (killed from outside): the next call's entry sees it and a fresh one
    # serves the running container's forwarder.
    sandbox = tmp_path / "state/workspace/sessions/sess-1/sandbox"
    os.kill(int((sandbox / "egress.pid").read_text().split()[0]), signal.SIGKILL)
    again = claude.bash(FETCH.format(urls=[url]))
    assert again.stdout.split("\n")[:1] == [GREETING], again
    # The fresh proxy knows the forwarder its predecessor met (egress.forwarder): its word
    # still names the call.
    last = json.loads(ws("status", "--json", check=True).stdout)["network"]["record"][-1]
    assert (last["host"], last["call"], last["open"]) == ("127.0.0.2", "toolu_0004", False), last
    # The user turns the network off: the next call runs in a container made so.
    path.write_text("network: off\n")
    after = claude.bash("echo proxy=[$HTTP_PROXY]; " + DIRECT.format(port=server.port))
    assert after.stdout.split("\n")[:3] == ["proxy=[]", "direct: failed", "['lo', 'ws0', 'ws1']"], after
    assert (sandbox / "egress.pid").read_text().split()[2] == "off"   # a recorder only
