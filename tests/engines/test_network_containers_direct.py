"""Direct attempts from a podman or docker session container (issue 24): with ``network`` a
list, a connection made around the proxy (a TCP connect, a UDP send) fails at once and is
on the record, ``via: direct``, with the call that made it; the helper that made the
watched pair (container/direct.py) gave the session container no NET_ADMIN, so a call
cannot undo it. With ``network`` off the same: the proxy runs as a recorder only (no socket
mounted, no proxy variables). One session per engine.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import engine_cli

# Each attempt prints its errno and how long it took (a refusal, not a timeout), then a
# netlink request to delete ws0 (the kernel's answer), then the devices left.
ATTEMPTS = """python3 - <<'EOF'
import socket, struct, time
def attempt(name, kind, data=b""):
    started = time.monotonic()
    s = socket.socket(socket.AF_INET, kind)
    s.settimeout(8)
    try:
        s.connect(("192.0.2.1", 4444))
        if data:
            s.send(data)
            s.recv(64)
        print(name, "reached")
    except OSError as exc:
        print(name, "errno", exc.errno, "seconds", round(time.monotonic() - started, 2))
attempt("tcp", socket.SOCK_STREAM)
attempt("udp", socket.SOCK_DGRAM, b"x" * 5)
nl = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
body = struct.pack("=BxHiII", 0, 0, socket.if_nametoindex("ws0"), 0, 0)
nl.send(struct.pack("=IHHII", 16 + len(body), 17, 5, 1, 0) + body)   # RTM_DELLINK, ACK
print("dellink", -struct.unpack_from("=i", nl.recv(4096), 16)[0])
print("devices", *sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]))
EOF
"""


@pytest.mark.parametrize("engine_name", ["podman", "docker"], indirect=True)
def test_direct_attempts_are_refused_at_once_and_recorded_with_their_call(
        engine_name: str, ws, tmp_path: Path, project: Path):
    path = tmp_path / "config/workspace/config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("network: ['allowed.invalid:443']\n")
    claude = Claude(project, tmp_path, engine=engine_cli(engine_name))
    claude.start()
    out = claude.bash(ATTEMPTS)
    results = {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines() if line}
    for name in ("tcp", "udp"):
        assert results[name][:2] == ["errno", "111"], out   # ECONNREFUSED: the ICMP answer
        assert float(results[name][3]) < 2, out
    assert results["dellink"] == ["1"], out                # EPERM: no NET_ADMIN inside
    assert results["devices"] == ["lo", "ws0", "ws1"], out

    # The proxy dies: the next call's prepare starts another, and the helper hands it a new
    # reader of the pair it finds made.
    sandbox = tmp_path / "state/workspace/sessions/sess-1/sandbox"
    os.kill(int((sandbox / "egress.pid").read_text().split()[0]), signal.SIGKILL)
    again = claude.bash(ATTEMPTS)
    assert again.stdout.startswith("tcp errno 111 seconds 0."), again

    # Off: the next call runs in a container made so, recorded the same way.
    path.write_text("network: off\n")
    off = claude.bash("echo proxy=[$HTTP_PROXY] socket=$(test -e /run/ws-egress && echo yes || echo no); "
                      + ATTEMPTS)
    assert off.stdout.startswith("proxy=[] socket=no\n"), off
    results = {line.split()[0]: line.split()[1:] for line in off.stdout.splitlines()[1:]}
    assert [results["tcp"][:2], results["udp"][:2], results["dellink"]] == \
        [["errno", "111"], ["errno", "111"], ["1"]], off

    network = json.loads(ws("status", "--json", check=True).stdout)["network"]
    seen = {(e["proto"], e["host"], e["port"], e["via"], e["allowed"], e["call"])
            for e in network["record"]}
    calls = ("toolu_0001", "toolu_0002", "toolu_0003")
    assert seen == {(proto, "192.0.2.1", 4444, "direct", False, call)
                    for proto in ("tcp", "udp") for call in calls}, network


@pytest.mark.parametrize("engine_name", ["podman", "docker"], indirect=True)
def test_a_helper_that_cannot_leaves_a_line_in_the_log(engine_name: str, tmp_path: Path):
    """No container to join (as with no veth or no image): False, and egress.log says why."""
    from types import SimpleNamespace

    from manager import config
    from manager.engines import registry
    from manager.engines.container import direct

    session = SimpleNamespace(sandbox=tmp_path / "sandbox")
    (session.sandbox / "egress").mkdir(parents=True)
    engine = registry.make(engine_cli(engine_name), config.load(None))
    assert direct.attach(engine, session, "ws-no-such-container") is False   # type: ignore[arg-type]
    log = (session.sandbox / "egress.log").read_text()
    assert log.startswith("network: direct connections are refused but not recorded ("), log
    assert not (session.sandbox / direct.TOKEN).exists()
