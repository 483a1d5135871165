"""doctor's probe of setting ``network`` on the overlay engine: in a scratch sandbox whose
list allows one loopback test server, that server answers through the proxy, a host not
listed is refused (403), a connection around the proxy reaches nothing (loopback: the
sandbox's own; another address: refused at once by the watched way out), and the proxy's
record holds the three attempts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from pathlib import Path

from manager.engines.base import NETWORK_CHECK
from manager.engines.base import Check
from manager.errors import WorkspaceError
from manager.session import paths

GREETING = b"workspace network probe"
SCRIPT = """
import socket, sys, urllib.error, urllib.request
port = int(sys.argv[1])
print("allowed", urllib.request.urlopen(f"http://127.0.0.2:{port}/", timeout=10).read().decode())
try:
    urllib.request.urlopen(f"http://refused.invalid:{port}/", timeout=10)
    print("refused reached")
except urllib.error.HTTPError as exc:
    print("refused", exc.code)
try:
    socket.create_connection(("127.0.0.2", port), timeout=3).close()
    print("direct reached")
except OSError:
    print("direct failed")
try:
    socket.create_connection(("192.0.2.1", 9), timeout=3).close()
    print("around reached")
except ConnectionRefusedError:
    print("around refused")
except OSError as exc:
    print("around failed", exc.errno)
"""
EXPECTED = f"allowed {GREETING.decode()}\nrefused 403\ndirect failed\naround refused\n"
UNRECORDED = "around failed "   # no veth in this kernel: confined, but direct attempts unrecorded


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server protocol
        self.send_response(200)
        self.send_header("Content-Length", str(len(GREETING)))
        self.end_headers()
        self.wfile.write(GREETING)

    def log_message(self, *args: object) -> None:
        pass


def test_server() -> ThreadingHTTPServer:
    """A server on 127.0.0.2 (any free port) that answers GET with the greeting, serving in
    a thread until ``shutdown()``. OSError where the loopback range has no 127.0.0.2."""
    server = ThreadingHTTPServer(("127.0.0.2", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def check() -> Check:
    from manager.engines.overlay import probe as overlay_probe

    try:
        server = test_server()
    except OSError as exc:
        return Check(NETWORK_CHECK, False, f"no loopback test server on 127.0.0.2: {exc}",
                     "the probe needs the loopback range 127.0.0.0/8")
    port = server.server_address[1]
    try:
        root = paths.state_home() / "probe"
        root.mkdir(parents=True, exist_ok=True)
        sandbox = Path(tempfile.mkdtemp(prefix="network-", dir=root))
        (sandbox / "network.json").write_text(json.dumps({"mode": "list",
                                                          "allow": [f"127.0.0.2:{port}"]}))
        why, note = _run(sandbox, port)
    except (OSError, WorkspaceError, subprocess.TimeoutExpired) as exc:
        why, note, sandbox = str(exc).split("\nhint:")[0], "", None
    finally:
        server.shutdown()
        server.server_close()
    if sandbox is not None:
        overlay_probe._stop(sandbox)
    return Check(NETWORK_CHECK, not why,
                 why or "with network a list, only its hosts answer (through the session's "
                        "proxy); other hosts are refused, and no connection goes around it" + note,
                 "use network: off, or engine podman/docker with container.network: false"
                 if why else "")


def _run(sandbox: Path, port: int) -> tuple[str, str]:
    """(why the probe failed, or ""; a note on what holds but is not recorded)."""
    from manager.egress import record
    from manager.engines.overlay import engine

    engine.start_holder(sandbox, "", 60.0, "probe")
    argv = ["/bin/bash", str(engine.ENTER_SCRIPT), str(sandbox), "probe", sys.executable, "/", "",
            f"{sys.executable} -I -c '{SCRIPT}' {port}"]
    proc = subprocess.run(argv, env=dict(os.environ, WORKSPACE_NO_FALLBACK="1"),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    unrecorded = proc.stdout.startswith(EXPECTED.rsplit("around", 1)[0] + UNRECORDED)
    if proc.stdout != EXPECTED and not unrecorded:
        return (f"expected {EXPECTED!r}, the sandbox said {proc.stdout!r} "
                f"{proc.stderr.strip()[-300:]!r}"), ""
    want = sorted([(False, "proxy"), (True, "proxy")] + ([] if unrecorded else [(False, "direct")]))
    held, found = record.awaited(
        sandbox, lambda got: sorted((e["allowed"], e.get("via", "proxy")) for e in got) == want)
    if not held:
        return f"the proxy's record does not hold the {len(want)} attempts: {found!r}", ""
    return "", ("; direct attempts fail but are not recorded (no veth in this kernel)"
                if unrecorded else "; direct attempts are refused and recorded")
