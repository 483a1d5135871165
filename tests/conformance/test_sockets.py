"""Unix sockets outside are reached from the overlay engine, as natively (docs/fidelity.md#sockets)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.as_user


@pytest.fixture
def echo_server() -> Iterator[Path]:
    """A server in /tmp (overlaid directly, nothing mounted below it) that answers "pong"."""
    path = Path(f"/tmp/wsconf-{uuid.uuid4().hex[:8]}.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(4)

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.sendall(b"pong")

    threading.Thread(target=answer, daemon=True).start()
    yield path
    server.close()
    path.unlink(missing_ok=True)


def test_a_socket_in_an_overlaid_directory_answers(ws, overlay_engine: None, echo_server: Path):
    script = ("import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
              "print(s.recv(4).decode())")
    proc = ws("run", "--", "python3", "-c", script, str(echo_server))
    assert (proc.returncode, proc.stdout) == (0, "pong\n"), proc.stderr


def test_a_stale_socket_can_be_removed_and_bound_again(ws, overlay_engine: None, tmp_path: Path):
    path = Path(f"/tmp/wsconf-{uuid.uuid4().hex[:8]}.sock")
    try:
        with socket.socket(socket.AF_UNIX) as stale:   # its daemon died without removing it
            stale.bind(str(path))
        rebind = ("import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); "
                  "print('bound')")
        proc = ws("run", "--", "sh", "-c", f'rm "$1" && python3 -c "{rebind}" "$1"', "sh", str(path))
        assert (proc.returncode, proc.stdout) == (0, "bound\n"), proc.stderr
    finally:
        path.unlink(missing_ok=True)


@pytest.mark.skipif(not os.path.exists("/var/run/docker.sock") or shutil.which("docker") is None,
                    reason="no Docker daemon on this machine")
def test_docker_daemon_is_reached(ws, overlay_engine: None):
    if not os.access("/var/run/docker.sock", os.W_OK):
        pytest.skip("this user may not use the Docker daemon outside either")
    proc = ws("run", "--", "docker", "version", "--format", "{{.Server.Version}}")
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr


class Server:
    """A unix socket server in /tmp answering ``reply`` to each connection."""

    def __init__(self, path: Path, reply: bytes) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(str(path))
        self.sock.listen(4)
        self.reply = reply
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.sock.accept()
                with conn:
                    conn.sendall(self.reply)

    def close(self) -> None:
        self.sock.close()


ASK = ("import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
       "print(s.recv(16).decode())")


def _holder(state: Path) -> str:
    return "".join(p.read_text() for p in state.glob("workspace/sessions/*/sandbox/holder.pid"))


def _kept_for_sockets(state: Path, holder: str) -> bool:
    """The holder is the same, or the ones before it retired for other reasons (on a busy
    host the real project or a directory with mounts below can change too): never for a
    socket (their reasons are in holder.log, which every holder of the session appends to)."""
    if _holder(state) == holder:
        return True
    reasons = [line for p in state.glob("workspace/sessions/*/sandbox/holder.log")
               for line in p.read_text().splitlines() if line.startswith("retired:")]
    return bool(reasons) and not any("sock" in line for line in reasons)


@pytest.mark.parametrize("restart", [False, True], ids=["started-later", "restarted"])
def test_a_daemon_started_after_the_sandbox_is_reached(ws, overlay_engine: None, tmp_path: Path,
                                                      restart: bool):
    """A daemon that starts, or restarts (a new socket at the same path), while the holder
    runs: the next call's sync binds the new socket (a view that looked the path up before
    it existed cannot show it: a fresh holder does)."""
    path = Path(f"/tmp/wsconf-{uuid.uuid4().hex[:8]}.sock")
    servers = [Server(path, b"first")] if restart else []
    try:
        first = ws("run", "--", "python3", "-c", ASK, str(path))
        assert first.stdout == ("first\n" if restart else ""), first.stderr
        holder = _holder(tmp_path / "state")
        if servers:
            servers[0].close()
            path.unlink()
        servers.append(Server(path, b"second"))
        proc = ws("run", "--", "python3", "-c", ASK, str(path))
        assert (proc.returncode, proc.stdout) == (0, "second\n"), proc.stderr
        if restart:   # bound over the old one: the same holder
            assert _kept_for_sockets(tmp_path / "state", holder)
    finally:
        for server in servers:
            server.close()
        path.unlink(missing_ok=True)


def test_sockets_made_outside_all_the_time_do_not_stop_calls(ws, overlay_engine: None, tmp_path: Path):
    """Daemons (and other sessions' tests) make and remove sockets in /tmp at any moment: the
    holder binds them at the next call instead of retiring, so no call finds it gone."""
    stop = threading.Event()

    def churn() -> None:
        for i in range(10_000):
            if stop.is_set():
                return
            path = Path(f"/tmp/wsconf-churn-{os.getpid()}-{i}.sock")
            with socket.socket(socket.AF_UNIX) as s:
                s.bind(str(path))
                s.listen(1)
                stop.wait(0.02)
            path.unlink()

    first = ws("run", "--", "true")
    assert first.returncode == 0, first.stderr
    holder = _holder(tmp_path / "state")
    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        for _ in range(3):
            proc = ws("run", "--", "true")
            assert proc.returncode == 0, proc.stderr
    finally:
        stop.set()
        thread.join()
    assert _kept_for_sockets(tmp_path / "state", holder)
