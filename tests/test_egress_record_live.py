"""The egress record's two-line attempts and the proxy's bound (holder/live.py, egress/record.py):
an allowed connection is on the record from the moment it is decided (``open``), completed
when it ends (``close``), closed by a proxy that stops; one more connection than the bound
closes the oldest, and past the waiting room connections are refused at once and counted.
The proxy's real writer, real sockets and threads."""

from __future__ import annotations

import contextlib
import fcntl
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from manager.egress import record
from manager.engines.overlay.holder import live
from manager.engines.overlay.holder.egress_proxy import Proxy


def lines(sandbox: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (sandbox / record.RECORD).read_text().splitlines()]


def test_an_allowed_connection_is_open_on_the_record_until_it_closes(tmp_path: Path):
    proxy = Proxy(str(tmp_path), ["example.org"])
    entry: dict[str, object] = {"time": 1.0, "call": "toolu_1", "method": "CONNECT",
                                "host": "example.org", "port": 443, "allowed": True}
    tally = proxy.live.opened(entry)
    [seen] = record.attempts(tmp_path)
    assert seen["open"] is True and seen["call"] == "toolu_1" and seen["host"] == "example.org"
    assert record.as_json(tmp_path)["open"] == 1
    assert "1 still open" in "\n".join(record.render(tmp_path))
    tally[0] += 5
    proxy.live.done({**entry, "up": 5, "down": 7, "seconds": 0.5})
    [seen] = record.attempts(tmp_path)
    assert (seen["open"], seen["up"], seen["down"], seen["time"]) == (False, 5, 7, 1.0)
    assert [e["state"] for e in lines(tmp_path)] == ["open", "close"]


def test_a_proxy_that_stops_closes_what_it_holds_with_the_bytes_so_far(tmp_path: Path):
    proxy = Proxy(str(tmp_path), ["example.org"])
    entry: dict[str, object] = {"time": 1.0, "call": "toolu_1", "host": "example.org",
                                "port": 443, "allowed": True}
    tally = proxy.live.opened(entry)
    tally[:] = [50000, 12]
    proxy.live.close_all("the proxy stopped")
    proxy.live.done({**entry, "up": 1, "down": 1})   # the relay ending after: no second close
    [seen] = record.attempts(tmp_path)
    assert (seen["open"], seen["up"], seen["down"], seen["error"]) == \
        (False, 50000, 12, "the proxy stopped")
    assert len(lines(tmp_path)) == 2


def test_the_reader_takes_a_torn_last_line_and_a_close_without_its_open(tmp_path: Path):
    opened = {"conn": "1.a.1", "state": "open", "host": "a.example", "port": 80,
              "allowed": True, "call": "toolu_1", "up": 0, "down": 0}
    orphan = {"conn": "1.a.2", "state": "close", "host": "b.example", "port": 80,
              "call": "toolu_2", "up": 3, "down": 4}
    refused = {"host": "c.example", "port": 80, "allowed": False, "call": "toolu_2"}
    text = "".join(json.dumps(e) + "\n" for e in (opened, orphan, refused))
    (tmp_path / record.RECORD).write_text(text + '{"conn": "1.a.1", "state": "clo')
    (tmp_path / live.LIVE_DIR).mkdir()
    with open(tmp_path / live.LIVE_DIR / "1.a", "w") as lock:   # its proxy runs
        fcntl.flock(lock, fcntl.LOCK_EX)
        seen = record.attempts(tmp_path)
    assert [(e["host"], e["open"]) for e in seen] == \
        [("a.example", True), ("b.example", False), ("c.example", False)]


KILLED = '''
import sys, time
from manager.engines.overlay.holder.egress_proxy import Proxy
proxy = Proxy(sys.argv[1], ["example.org"])
for n in (1, 2):
    proxy.live.opened({"time": 1.0, "call": f"toolu_{n}", "host": "example.org", "port": 443,
                       "allowed": True})
print("open", flush=True)
time.sleep(60)
'''


def test_a_proxy_killed_outright_leaves_no_attempt_open(tmp_path: Path):
    """SIGKILL lets a proxy write no close: while it ran its attempts were open; after,
    the reader shows them ended (the kernel dropped the proxy's lock), saying why. Before,
    they read as open for ever."""
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(tmp_path)], stdout=subprocess.PIPE,
                            text=True, cwd=Path(__file__).resolve().parents[1])
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "open\n"
        assert [e["open"] for e in record.attempts(tmp_path)] == [True, True]
        assert record.as_json(tmp_path)["open"] == 2
    finally:
        proc.kill()
        proc.wait()
    seen = record.attempts(tmp_path)
    assert [(e["call"], e["open"], e.get("error")) for e in seen] == \
        [("toolu_1", False, record.ORPHANED), ("toolu_2", False, record.ORPHANED)]
    assert "still open" not in "\n".join(record.render(tmp_path))
    # A proxy that ends as it should closes its attempts itself, and takes its lock file.
    proxy = Proxy(str(tmp_path), ["example.org"])
    proxy.live.opened({"time": 2.0, "call": "toolu_3", "host": "example.org", "port": 443,
                       "allowed": True})
    assert record.attempts(tmp_path)[-1]["open"] is True
    proxy.live.close_all("the proxy stopped")
    assert record.attempts(tmp_path)[-1]["error"] == "the proxy stopped"
    [left] = (tmp_path / live.LIVE_DIR).iterdir()     # the killed one's, unlocked
    assert left.name.startswith(f"{proc.pid}.")


def _serve_pairs(proxy: Proxy, handle, count: int) -> list[socket.socket]:
    peers = []
    for _ in range(count):
        ours, theirs = socket.socketpair()
        peers.append(theirs)
        proxy.live.serve(ours, handle)
    return peers


def _until(condition, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_connection_over_the_bound_closes_the_oldest_and_takes_its_slot(tmp_path: Path):
    """Held connections cannot keep a later attempt off the record (attack pass 9): past
    LIMIT, a connection closes the oldest and is served in its slot."""
    proxy = Proxy(str(tmp_path), [])
    served = []

    def hold(conn: socket.socket) -> None:   # until its peer or the proxy ends it
        served.append(conn)
        with contextlib.suppress(OSError):
            conn.recv(1)
        conn.close()

    peers = _serve_pairs(proxy, hold, live.LIMIT)
    _until(lambda: len(served) == live.LIMIT)
    peers += _serve_pairs(proxy, hold, 1)
    peers[0].settimeout(5)
    assert peers[0].recv(1) == b""            # the oldest: closed for the newest
    _until(lambda: len(served) == live.LIMIT + 1)
    assert len(served) == live.LIMIT + 1
    for p in peers[1:]:
        p.settimeout(0)
        with pytest.raises(BlockingIOError):
            p.recv(1)                         # the others and the newest: still served
    for p in peers:
        p.close()


def test_connections_past_the_waiting_room_are_refused_at_once_and_counted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(live, "WAIT_SECONDS", 0.5)
    proxy = Proxy(str(tmp_path), [])
    release = threading.Event()
    served = []

    def hold(conn: socket.socket) -> None:   # deaf to the proxy's shutdown: no slot frees
        served.append(conn)
        release.wait(10)
        conn.close()

    peers = _serve_pairs(proxy, hold, live.LIMIT)
    _until(lambda: len(served) == live.LIMIT)
    peers += _serve_pairs(proxy, hold, live.WAITING + 6)
    for p in peers[live.LIMIT:]:              # waited for a slot in vain, or none to wait
        p.settimeout(5)
        assert p.recv(1) == b""
    assert len(served) == live.LIMIT
    release.set()
    for p in peers:
        p.close()
    # The first refusal is written at once, the burst's rest when a slot frees.
    refused = live.WAITING + 6
    _until(lambda: sum(map(record.size, record.attempts(tmp_path))) >= refused)
    entries = record.attempts(tmp_path)
    assert sum(map(record.size, entries)) == refused, entries
    assert all(e["via"] == "limit" and e["allowed"] is False for e in entries)
    data = record.as_json(tmp_path)
    assert (data["attempts"], data["refused"]) == (refused, refused)
    assert "REFUSED (too many connections at once)" in "\n".join(record.render(tmp_path))


def test_a_request_head_trickled_in_loses_its_slot(tmp_path: Path, monkeypatch):
    """The head timeout was per read: a byte every 9 s held a slot for ever, and 64 such
    connections every slot (attack pass 8). The whole head has its time, however it comes."""
    import os

    monkeypatch.setattr(live, "HEAD_SECONDS", 1.0)
    proxy = Proxy(str(tmp_path), [])
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        conn, _ = server.accept()
        proxy.live.serve(conn, proxy.handle, os.getpid())
        started, ended = time.monotonic(), None
        client.settimeout(0.3)
        for byte in b"CONNECT example.org:443 HTTP/1.1\r\n":
            try:
                client.sendall(bytes([byte]))
                client.recv(100)          # an answer (400) or the end: the slot is gone
            except TimeoutError:
                continue   # nothing yet: the next byte, well inside the per-read timeout
            except OSError:
                pass
            ended = time.monotonic()
            break
        client.close()
    assert ended is not None and ended - started < 4, "the trickled head kept its slot"
    deadline = time.monotonic() + 5
    while proxy.live.heads and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not proxy.live.heads
