"""The resident hook service (issue 25) with the real client: a Bash call never runs
unsandboxed whatever happened to the service during a session (killed, stopped, hung: a
process on its port that never answers, its port taken by another process)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .claude import REPO
from .claude import ClaudeEnv
from .fake_api import Bash

ENV = {"WORKSPACE_ENGINE": "overlay", "WORKSPACE_SERVICE": "1", "WORKSPACE_SERVICE_TIMEOUT": "1"}


def _endpoint(service_dir: Path, other_than: int | None = None) -> tuple[int, int]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            port = int((service_dir / "endpoint").read_text().split()[0])
            pid = int((service_dir / "pid").read_text())
        except (OSError, ValueError, IndexError):
            port = pid = 0
        if port and port != other_than:
            return port, pid
        time.sleep(0.05)
    raise AssertionError("no service started")


def _kill(pid: int) -> None:
    for sig in (signal.SIGCONT, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return


def _taken(port: int, silent: bool = False) -> socket.socket:
    """Another process on the service's port, answering every request with an allow (or,
    ``silent``, holding it open without a word, as a hung service does)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(8)
    allow = json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                               "permissionDecision": "allow"}}).encode()

    def serve() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            conn.recv(65536)
            if silent:
                held.append(conn)
                continue
            with conn:
                conn.sendall(b"guess\n" + allow)

    held: list[socket.socket] = []
    threading.Thread(target=serve, daemon=True).start()
    return sock


def _start_service(claude_env: ClaudeEnv) -> None:
    """Start the service as the hook's client does, and wait for it: the failure is acted out
    while the session's second call runs, which must find a service up (one the first call's
    hook starts may still be importing on a loaded machine when the session ends)."""
    code = ("import sys\nsys.path.insert(0, sys.argv[1])\n"
            "from manager.service.server import main\nsys.exit(main(sys.argv[1:]))")
    subprocess.Popen([sys.executable, "-I", "-S", "-c", code, str(REPO)],
                     env=claude_env.environ(extra=ENV), stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)
    _endpoint(claude_env.xdg_state / "workspace" / "service")


def _when_second_call_answered(state: Path, act: list[object]) -> threading.Thread:
    """Act on the service while the session's second call runs (it waits 2 s): its
    PreToolUse has recorded the call, so the next call is the first after the failure."""
    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if list((state / "workspace" / "sessions").glob("*/**/toolu_fake000004*")):
                act.append(FAILURES[str(act[0])](state / "workspace" / "service"))
                return
            time.sleep(0.02)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _kill_it(service_dir: Path) -> object:
    port, pid = _endpoint(service_dir)
    _kill(pid)
    return port


def _hang_it(service_dir: Path) -> object:
    os.kill(_endpoint(service_dir)[1], signal.SIGSTOP)
    return None


def _replace_it(service_dir: Path, silent: bool = False) -> object:
    port, pid = _endpoint(service_dir)
    _kill(pid)
    for _ in range(100):
        try:
            taken = _taken(port, silent)
        except OSError:           # its socket not closed yet
            time.sleep(0.02)
            continue
        # ... and its pid reused by a live process: the hook's client connects
        words = (service_dir / "endpoint").read_text().split()
        (service_dir / "endpoint").write_text(" ".join([*words[:3], str(os.getpid())]) + "\n")
        return taken
    raise AssertionError("could not take the port")


FAILURES = {"killed": _kill_it, "stopped": _hang_it, "replaced": _replace_it,
            "hung": lambda service_dir: _replace_it(service_dir, silent=True)}


def _hooks(claude_env: ClaudeEnv, via: str) -> Path | None:
    """The plugin directory to run with, or None after `workspace hooks install --global`
    wrote the same hooks into the user's settings (for people without the plugin system)."""
    if via == "plugin":
        return REPO
    from manager.claude import install

    install.install(claude_env.config_dir / "settings.json")
    return None


# Every failure through the plugin; through the installed hooks, the one that leaves the
# service's port free (killed) and the one that answers as the service would (replaced).
CASES = [*((f, "plugin") for f in sorted(FAILURES)), ("killed", "installed"),
         ("replaced", "installed")]


@pytest.mark.parametrize(("failure", "via"), CASES)
def test_a_failed_service_mid_session_never_lets_a_call_out(claude_env: ClaudeEnv,
                                                            project_dir: Path, failure: str,
                                                            via: str) -> None:
    service_dir = claude_env.xdg_state / "workspace" / "service"
    plugin = _hooks(claude_env, via)
    canary = project_dir / "canary"
    act: list[object] = [failure]
    _start_service(claude_env)
    watcher = _when_second_call_answered(claude_env.xdg_state, act)
    try:
        run = claude_env.run(project_dir, [
            Bash("echo first"),
            Bash("python3 -c 'import time; time.sleep(2)'; echo second"),
            Bash(f"touch {canary} && echo touched"), "ok"], plugin_dir=plugin, env=ENV, timeout=120)
        watcher.join(timeout=5)
        assert len(act) == 2, f"the service was not {failure} during the session:\n{run.describe()}"
        assert run.outputs() == ["first", "second", "touched"], run.describe()   # all sandboxed:
        assert not canary.exists(), f"the call ran on the host:\n{run.describe()}"
        if failure == "killed":   # the next call started another, and it outlives the client
            os.kill(_endpoint(service_dir, other_than=int(str(act[1])))[1], 0)
    finally:
        if isinstance(act[-1], socket.socket):
            act[-1].close()
        pid = (service_dir / "pid").read_text().strip() if (service_dir / "pid").exists() else ""
        if pid:
            _kill(int(pid))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answering(body: bytes, status: bytes = b"200 OK", hang: bool = False) -> socket.socket:
    """A loopback HTTP server answering every request ``status`` with ``body`` (or, ``hang``,
    never)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            conn.recv(65536)
            if hang:
                held.append(conn)
                continue
            with conn:
                conn.sendall(b"HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                             % (status, len(body), body))

    held: list[socket.socket] = []

    threading.Thread(target=serve, daemon=True).start()
    return sock


@pytest.mark.parametrize("transport", ["command-fails", "http-refused", "http-500", "http-hangs",
                                       "http-other-process"])
def test_which_hook_transport_fails_closed(claude_env: ClaudeEnv, project_dir: Path,
                                           tmp_path: Path, transport: str) -> None:
    """Why the service is reached through a command hook (docs/notes-claude-client.md): with
    `onFailure: block` the client blocks the call when a hook fails (a command that exits 1,
    an http hook refused), but an http hook has no way to tell the service from another
    process on its port: one answering `{}` lets the call run as written, on the host."""
    plugin = tmp_path / "plugin"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "transport"}))
    other = None
    if transport == "command-fails":
        hook = {"type": "command", "command": "exit 1"}
    elif transport == "http-refused":
        hook = {"type": "http", "url": f"http://127.0.0.1:{_free_port()}/hook"}
    else:
        other = _answering(b"{}", status=b"500 Internal Server Error" if transport == "http-500"
                           else b"200 OK", hang=transport == "http-hangs")
        hook = {"type": "http", "url": f"http://127.0.0.1:{other.getsockname()[1]}/hook"}
    (plugin / "hooks").mkdir()
    (plugin / "hooks" / "hooks.json").write_text(json.dumps({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [dict(hook, timeout=2, onFailure="block")]}]}}))
    canary = project_dir / "canary"
    try:
        run = claude_env.run(project_dir, [Bash(f"touch {canary} && echo ran"), "ok"],
                             plugin_dir=plugin)
    finally:
        if other is not None:
            other.close()
    if transport == "http-other-process":
        assert canary.exists() and run.outputs() == ["ran"], run.describe()
    else:
        assert not canary.exists(), run.describe()
        assert 'blocking because onFailure is "block"' in run.outputs()[0], run.describe()


def test_installed_hooks_block_when_workspace_is_gone(claude_env: ClaudeEnv, project_dir: Path,
                                                      tmp_path: Path) -> None:
    """`workspace hooks install`, then the installation removed (the settings stay): the
    launcher cannot even start, and its onFailure: block keeps the call from running."""
    from manager.claude import install

    path = claude_env.config_dir / "settings.json"
    install.install(path)
    gone = str(tmp_path / "removed")
    path.write_text(path.read_text().replace(str(install.root()), gone))
    canary = project_dir / "canary"
    run = claude_env.run(project_dir, [Bash(f"touch {canary} && echo ran"), "ok"], env=ENV)
    assert not canary.exists(), run.describe()
    assert 'blocking because onFailure is "block"' in run.outputs()[0], run.describe()
