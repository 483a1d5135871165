"""Direct connection attempts (issue 24): with ``network`` off or a list, a command that
connects around the proxy (TCP, UDP, a DNS query to a nameserver out there or on loopback,
curl --noproxy) fails at once, and each attempt is on the record with the call that made
it; the sandbox has no route out.

The server the commands try to reach listens on every address of this machine, its
own non-loopback one included: reachable from here, not from the sandbox.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.claude.conftest import Claude

# Each attempt prints its name, its errno and how long it took; the timeouts are far above
# what a refusal takes, so a time under them says the refusal came back.
ATTEMPTS = """python3 - <<'EOF'
import socket, struct, time
def attempt(name, family, kind, address, data=b""):
    started = time.monotonic()
    s = socket.socket(family, kind)
    s.settimeout(8)
    try:
        s.connect(address)
        if kind == socket.SOCK_DGRAM:
            s.send(data)
            s.recv(512)
        print(name, "reached")
    except OSError as exc:
        print(name, "errno", exc.errno, "seconds", round(time.monotonic() - started, 2))
    finally:
        s.close()
query = struct.pack("!HHHHHH", 7, 0x100, 1, 0, 0, 0) + b"\\x04evil\\x07example\\x00" + b"\\x00\\x01\\x00\\x01"
attempt("tcp", socket.AF_INET, socket.SOCK_STREAM, ("{host}", {port}))
attempt("udp", socket.AF_INET, socket.SOCK_DGRAM, ("192.0.2.7", 4444), b"x" * 5)
attempt("dns", socket.AF_INET, socket.SOCK_DGRAM, ("192.0.2.53", 53), query)
attempt("tcp6", socket.AF_INET6, socket.SOCK_STREAM, ("2001:db8::9", 443))
local = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
local.settimeout(8)
local.connect(("127.0.0.53", 53))   # a host whose resolver is systemd-resolved's
local.send(query.replace(b"evil", b"near"))
answer = local.recv(512)
local.send(query.replace(b"evil", b"near"))   # a resolver's retry: the same lookup
local.recv(512)
print("localdns rcode", answer[3] & 15, "question", answer[12:] == query[12:].replace(b"evil", b"near"))
EOF
curl -s -m 8 --noproxy '*' http://192.0.2.80:8080/; echo curl=$?
"""


def _host_address() -> str:
    """This machine's own address on its default route (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))
        return str(s.getsockname()[0])


@pytest.fixture
def server() -> Iterator[tuple[str, int]]:
    """A listener on every address of this machine (accepting: a connection would succeed)."""
    s = socket.create_server(("0.0.0.0", 0))
    yield _host_address(), s.getsockname()[1]
    s.close()


def _config(tmp_path: Path, value: str) -> None:
    path = tmp_path / "config/workspace/config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"engine: overlay\nnetwork: {value}\n")


def _results(stdout: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:] for line in stdout.splitlines() if line.strip()}


def _refused_fast(results: dict[str, list[str]]) -> None:
    for name in ("tcp", "udp", "dns", "tcp6"):
        words = results[name]
        assert words[:2] == ["errno", str(111)], (name, words)   # ECONNREFUSED, not a timeout
        assert float(words[3]) < 2, (name, words)


def test_off_refuses_direct_attempts_at_once_and_records_them(ws, tmp_path: Path,
                                                              server: tuple[str, int]):
    host, port = server
    _config(tmp_path, "off")
    proc = ws("run", "-c", ATTEMPTS.format(host=host, port=port), check=True)
    results = _results(proc.stdout)
    _refused_fast(results)
    assert results["localdns"] == ["rcode", "5", "question", "True"], proc.stdout   # REFUSED
    assert "curl=7" in proc.stdout, proc.stdout
    network = json.loads(ws("status", "--json", check=True).stdout)["network"]
    seen = {(e["proto"], e["host"], e["port"]) for e in network["record"]}
    assert seen == {("tcp", host, port), ("udp", "192.0.2.7", 4444), ("udp", "192.0.2.53", 53),
                    ("tcp", "2001:db8::9", 443), ("tcp", "192.0.2.80", 8080),
                    ("udp", "127.0.0.53", 53)}, network["record"]
    assert all(e["via"] == "direct" and e["allowed"] is False for e in network["record"])
    queries = {e["host"]: e["query"] for e in network["record"] if e["port"] == 53}
    assert queries == {"192.0.2.53": "evil.example", "127.0.0.53": "near.example"}
    assert [e["host"] for e in network["record"]].count("127.0.0.53") == 1   # retried: once
    assert network["refused"] == 6
    assert {e["call"] for e in network["record"]} == {""}   # a `workspace run`: no call
    assert "call (no call: workspace run" in ws("status", "--network", check=True).stdout
    # The host's side: the same server is reachable from here.
    socket.create_connection((host, port), timeout=5).close()


def test_a_list_records_direct_attempts_per_call(claude: Claude, ws, tmp_path: Path,
                                                 server: tuple[str, int]):
    host, port = server
    _config(tmp_path, f"['{host}:{port}']")   # allowed through the proxy, never around it
    claude.start()
    first = claude.bash(ATTEMPTS.format(host=host, port=port))
    _refused_fast(_results(first.stdout))
    second = claude.bash("curl -s -m 5 -o /dev/null -w '%{http_code}' http://192.0.2.99:81/")
    assert second.stdout == "403", second

    network = json.loads(ws("status", "--json", check=True).stdout)["network"]
    calls = {(e["host"], e["port"]): e["call"] for e in network["record"]}
    assert calls[(host, port)] == "toolu_0001" and calls[("192.0.2.99", 81)] == "toolu_0002"
    assert calls[("2001:db8::9", 443)] == "toolu_0001"
    listing = ws("status", "--network", check=True).stdout
    blocks = listing.split("call ")[1:]
    assert [b.split(":")[0] for b in blocks] == ["toolu_0001", "toolu_0002"], listing
    assert "REFUSED [2001:db8::9]:443 direct tcp" in blocks[0]
    assert f"REFUSED {host}:{port} direct tcp" in blocks[0]
    assert "192.0.2.53:53 direct udp (dns evil.example)" in blocks[0]
    assert "REFUSED 192.0.2.99:81" in blocks[1] and "direct" not in blocks[1]
    as_json = json.loads(ws("status", "--network", "--json", check=True).stdout)
    assert [c["call"] for c in as_json["calls"]] == ["toolu_0001", "toolu_0002"]
    assert len(as_json["calls"][0]["attempts"]) == 6
    assert "REFUSED 127.0.0.53:53 direct udp (dns near.example)" in blocks[0]
    stop = claude.hook("Stop", {"stop_hook_active": False}).json
    context = stop["hookSpecificOutput"]["additionalContext"]
    assert "refused 7 network connection(s)" in context and "192.0.2.53:53 (1x)" in context, context


def test_off_tells_the_model_at_stop(claude: Claude, tmp_path: Path):
    _config(tmp_path, "off")
    claude.start()
    claude.bash("curl -s -m 5 --noproxy '*' http://192.0.2.80:8080/; echo curl=$?")
    context = claude.hook("Stop", {"stop_hook_active": False}).json["hookSpecificOutput"][
        "additionalContext"]
    assert "192.0.2.80:8080 (1x)" in context and "`network` is off" in context, context


@pytest.fixture
def claude(project: Path, tmp_path: Path) -> Claude:
    return Claude(project, tmp_path)


def test_no_route_out_of_the_sandbox(ws, tmp_path: Path):
    """Only loopback and the watched pair inside, every route to the pair's inner end."""
    _config(tmp_path, "off")
    proc = ws("run", "-c", "cat /proc/net/dev; echo ---; cat /proc/net/route; echo ---; "
                           "cat /proc/net/ipv6_route", check=True)
    devices, routes4, routes6 = proc.stdout.split("---\n")
    assert sorted(line.split(":")[0].strip() for line in devices.splitlines()[2:]) == \
        ["lo", "ws0", "ws1"], devices
    assert [r.split()[:2] for r in routes4.splitlines()[1:]] == [["ws0", "00000000"]], routes4
    # IPv6: the default route to ws0; lo's own; ws1 and ws0 their link-local ones only.
    for route in routes6.splitlines():
        dest, device = route.split()[0], route.split()[-1]
        if device == "ws0" and dest == "0" * 32:
            continue
        assert device == "lo" or dest.startswith(("fe80", "ff00", "fd77")), route
