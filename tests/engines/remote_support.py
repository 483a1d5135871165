"""The remote engines the remote tests use (issue 26), and a socket proxy that can cut a connection.

docker: a second daemon in its own mount and network namespaces (``remote_dockerd.sh``),
reachable only by its socket. Started here when the tests run as root; the ordinary account
cannot start one, so its run uses the one named by ``WS_TEST_REMOTE_DOCKER`` (a ``unix://``
URL; scripts/test.sh starts it and hands its socket to that account).

podman: ``podman system service`` run as the ordinary account (rootless), its API socket
in a temp dir; root's run talks to the same account's service.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DAEMON_SCRIPT = HERE / "remote_dockerd.sh"
DOCKER_VARIABLE = "WS_TEST_REMOTE_DOCKER"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the remote engine must run in CI: {reason}")
    pytest.skip(reason)


@contextlib.contextmanager
def second_dockerd() -> Iterator[str]:
    """A ``unix://`` URL of a Docker daemon that shares no path with this host."""
    named = os.environ.get(DOCKER_VARIABLE)
    if named:
        yield named
        return
    if os.geteuid() != 0:
        _unavailable(f"no second dockerd: as an ordinary user, set {DOCKER_VARIABLE} "
                     f"(scripts/test.sh starts one as root)")
    folder = tempfile.mkdtemp(prefix="wsrd.", dir="/tmp")   # short: a socket path
    user = os.environ.get("WORKSPACE_TEST_USER", "wstest")
    started = subprocess.run(["bash", str(DAEMON_SCRIPT), "start", folder, user],
                             capture_output=True, text=True, timeout=300, check=False)
    try:
        if started.returncode != 0:
            _unavailable(f"the second dockerd did not start: {started.stderr.strip()}")
        yield f"unix://{folder}/docker.sock"
    finally:
        subprocess.run(["bash", str(DAEMON_SCRIPT), "stop", folder], capture_output=True,
                       timeout=120, check=False)


@contextlib.contextmanager
def podman_service() -> Iterator[str]:
    """A ``unix://`` URL of the ordinary account's rootless podman API service."""
    name = os.environ.get("WORKSPACE_TEST_USER", "wstest") if os.geteuid() == 0 else None
    entry = pwd.getpwnam(name) if name else pwd.getpwuid(os.geteuid())
    folder = tempfile.mkdtemp(prefix="wspod.", dir="/tmp")
    os.chown(folder, entry.pw_uid, entry.pw_gid)
    sock = f"{folder}/podman.sock"
    env = {"HOME": entry.pw_dir, "USER": entry.pw_name, "PATH": "/usr/local/bin:/usr/bin:/bin",
           "XDG_RUNTIME_DIR": f"/run/user/{entry.pw_uid}"}
    argv = ["podman", "system", "service", "--time=0", f"unix://{sock}"]
    if name:
        argv = ["runuser", "-u", name, "--", "env", "-i", *[f"{k}={v}" for k, v in env.items()],
                *argv]
    proc = subprocess.Popen(argv, env=env if not name else None, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(sock) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if not os.path.exists(sock):
            _unavailable("podman system service did not start")
        yield f"unix://{sock}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        subprocess.run(["rm", "-rf", folder], check=False)


class CuttingProxy:
    """A unix-socket proxy to an engine's socket that cuts a connection (both ways, at once)
    once it has carried ``cut_after`` bytes from the engine: a network dying mid-stream."""

    def __init__(self, target: str, path: str) -> None:
        self.target = target
        self.path = path
        self.cut_after: int | None = None
        self.cuts = 0
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            engine.connect(self.target)
            pair = (client, engine)
            threading.Thread(target=self._pump, args=(client, engine, pair, False),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(engine, client, pair, True),
                             daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket,
              pair: tuple[socket.socket, socket.socket], counted: bool) -> None:
        carried, cut = 0, False
        try:
            while data := src.recv(65536):
                carried += len(data) if counted else 0
                if counted and self.cut_after is not None and carried > self.cut_after:
                    self.cuts += 1
                    cut = True
                    break
                dst.sendall(data)
        except OSError:
            cut = True
        # A half-close passes on as one (an exec's stdin ends, its output still comes back);
        # a cut ends both directions.
        for end in pair if cut else (dst,):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR if cut else socket.SHUT_WR)

    def close(self) -> None:
        self.listener.close()
